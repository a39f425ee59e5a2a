; Parses, but %late is used before it is defined: the verifier rejects it.
define i32 @uses_before_def(i32 %a) {
entry:
  %sum = add i32 %a, %late
  %late = mul i32 %a, 3
  ret i32 %sum
}
