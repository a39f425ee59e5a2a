define i32 @f(i32 %a) {
entry:
  %x = add i32 %nothere, 1
  ret i32 %x
}
