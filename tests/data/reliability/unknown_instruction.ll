define i32 @f(i32 %a) {
entry:
  %x = frobnicate i32 %a, 3
  ret i32 %x
}
