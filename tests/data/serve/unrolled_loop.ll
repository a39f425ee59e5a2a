; A loop -Oz fully unrolls (25 instructions) where sroa alone leaves 14: a pass list that beats -Oz.
define i32 @f(i32 %a0, i32 %a1) {
entry:
  %a0.addr = alloca i32, align 4
  %a1.addr = alloca i32, align 4
  %acc = alloca i32, align 4
  %i = alloca i32, align 4
  store i32 %a0, ptr %a0.addr, align 4
  store i32 %a1, ptr %a1.addr, align 4
  store i32 9, ptr %acc, align 4
  %t0 = load i32, ptr %acc, align 4
  %t1 = load i32, ptr %a0.addr, align 4
  %t2 = sub nsw i32 %t0, %t1
  store i32 %t2, ptr %acc, align 4
  %t3 = load i32, ptr %acc, align 4
  %t4 = load i32, ptr %a0.addr, align 4
  %t5 = mul nsw i32 %t3, %t4
  store i32 %t5, ptr %acc, align 4
  %t6 = load i32, ptr %acc, align 4
  %t7 = load i32, ptr %a1.addr, align 4
  %t8 = and i32 %t6, %t7
  store i32 %t8, ptr %acc, align 4
  store i32 0, ptr %i, align 4
  br label %cond
cond:
  %t9 = load i32, ptr %i, align 4
  %t10 = icmp slt i32 %t9, 7
  br i1 %t10, label %body, label %exit
body:
  %t12 = load i32, ptr %acc, align 4
  %t13 = load i32, ptr %a0.addr, align 4
  %t14 = or i32 %t12, %t13
  store i32 %t14, ptr %acc, align 4
  %t15 = load i32, ptr %acc, align 4
  %t16 = load i32, ptr %a1.addr, align 4
  %t17 = sub nsw i32 %t15, %t16
  store i32 %t17, ptr %acc, align 4
  %t18 = load i32, ptr %acc, align 4
  %t19 = load i32, ptr %a1.addr, align 4
  %t20 = or i32 %t18, %t19
  store i32 %t20, ptr %acc, align 4
  %t21 = load i32, ptr %i, align 4
  %t11 = add nsw i32 %t21, 1
  store i32 %t11, ptr %i, align 4
  br label %cond
exit:
  %t22 = load i32, ptr %acc, align 4
  ret i32 %t22
}

