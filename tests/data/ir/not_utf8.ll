; Latin-1 bytes in a comment: été
define void @f() {
  ret void
}
