define i32 @f(i32 %a) {
entry:
  %x = add i32 %y, 1
  %y = add i32 %a, 2
  br label %exit
exit:
  %z = add i32 %x, 1
  ret i64 0
}
