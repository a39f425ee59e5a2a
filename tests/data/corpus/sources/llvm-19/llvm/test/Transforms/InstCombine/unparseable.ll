; RUN: opt < %s -passes=instcombine -S
; Not valid for LLVM 20: the build skips it.
define i32 @bad(i32 %x) {
  %y = frobnicate i32 %x
  ret i32 %y
}
