; Sum of the first n elements of an array, as clang -O0 -Xclang -disable-O0-optnone writes it.
define i32 @sum(ptr %a, i32 %n) {
entry:
  %a.addr = alloca ptr, align 8
  %n.addr = alloca i32, align 4
  %s = alloca i32, align 4
  %i = alloca i32, align 4
  store ptr %a, ptr %a.addr, align 8
  store i32 %n, ptr %n.addr, align 4
  store i32 0, ptr %s, align 4
  store i32 0, ptr %i, align 4
  br label %cond

cond:
  %0 = load i32, ptr %i, align 4
  %1 = load i32, ptr %n.addr, align 4
  %cmp = icmp slt i32 %0, %1
  br i1 %cmp, label %body, label %end

body:
  %2 = load ptr, ptr %a.addr, align 8
  %3 = load i32, ptr %i, align 4
  %idx = sext i32 %3 to i64
  %p = getelementptr inbounds i32, ptr %2, i64 %idx
  %4 = load i32, ptr %p, align 4
  %5 = load i32, ptr %s, align 4
  %add = add nsw i32 %5, %4
  store i32 %add, ptr %s, align 4
  %6 = load i32, ptr %i, align 4
  %inc = add nsw i32 %6, 1
  store i32 %inc, ptr %i, align 4
  br label %cond

end:
  %7 = load i32, ptr %s, align 4
  ret i32 %7
}
