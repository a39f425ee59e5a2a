; Calls a function that is never declared.
define i32 @caller(i32 %a) {
entry:
  %r = call i32 @nowhere(i32 %a)
  ret i32 %r
}
