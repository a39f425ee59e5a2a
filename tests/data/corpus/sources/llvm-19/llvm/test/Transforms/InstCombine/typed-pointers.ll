; RUN: opt < %s -passes=instcombine -S | FileCheck %s
; Old typed-pointer syntax: llvmlite (LLVM 20) upgrades i32* to ptr.

define i32 @load_twice(i32* %p) {
; CHECK: load i32
  %a = load i32, i32* %p
  %b = load i32, i32* %p
  %c = add i32 %a, %b
  store i32 %c, i32* %p
  ret i32 %c
}
