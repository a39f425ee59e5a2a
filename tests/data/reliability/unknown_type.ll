define i32 @f(i32 %a) {
entry:
  %x = add quux %a, 3
  ret i32 %x
}
