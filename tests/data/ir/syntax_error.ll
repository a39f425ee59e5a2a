; The add on line 5 is missing its second operand.
define i32 @broken(i32 %a) {
entry:
  %b = mul i32 %a, 2
  %c = add i32 %b
  ret i32 %c
}
