; RUN: opt < %s -passes=instcombine -S | FileCheck %s

define i32 @add_sub(i32 %a, i32 %b) {
; CHECK-LABEL: @add_sub(
; CHECK-NEXT:    ret i32 %a
  %t = add i32 %a, %b
  %r = sub i32 %t, %b
  ret i32 %r
}

define i32 @select_cmp(i32 %x, i32 %y) {
; CHECK-LABEL: @select_cmp(
  %c = icmp slt i32 %x, %y
  %m = select i1 %c, i32 %x, i32 %y
  %d = mul i32 %m, 2
  %e = add i32 %d, %x
  ret i32 %e
}

define i32 @tiny(i32 %x) {
  ret i32 %x
}
