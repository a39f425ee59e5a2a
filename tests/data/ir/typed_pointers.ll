; Old (LLVM <= 14) IR with typed pointers, written for optserve's tests. LLVM 20 upgrades i32* etc. to ptr.
; ModuleID = 'typed_pointers.c'
source_filename = "typed_pointers.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%struct.pair = type { i32, i32 }

@table = dso_local global [4 x i32] [i32 1, i32 2, i32 3, i32 4], align 16

; Function Attrs: noinline nounwind uwtable
define dso_local i32 @sum_pairs(%struct.pair* %pairs, i32 %count) #0 {
entry:
  %pairs.addr = alloca %struct.pair*, align 8
  %count.addr = alloca i32, align 4
  %total = alloca i32, align 4
  %i = alloca i32, align 4
  store %struct.pair* %pairs, %struct.pair** %pairs.addr, align 8
  store i32 %count, i32* %count.addr, align 4
  store i32 0, i32* %total, align 4
  store i32 0, i32* %i, align 4
  br label %for.cond

for.cond:                                         ; preds = %for.inc, %entry
  %0 = load i32, i32* %i, align 4
  %1 = load i32, i32* %count.addr, align 4
  %cmp = icmp slt i32 %0, %1
  br i1 %cmp, label %for.body, label %for.end

for.body:                                         ; preds = %for.cond
  %2 = load %struct.pair*, %struct.pair** %pairs.addr, align 8
  %3 = load i32, i32* %i, align 4
  %idxprom = sext i32 %3 to i64
  %arrayidx = getelementptr inbounds %struct.pair, %struct.pair* %2, i64 %idxprom
  %first = getelementptr inbounds %struct.pair, %struct.pair* %arrayidx, i32 0, i32 0
  %4 = load i32, i32* %first, align 4
  %second = getelementptr inbounds %struct.pair, %struct.pair* %arrayidx, i32 0, i32 1
  %5 = load i32, i32* %second, align 4
  %add = add nsw i32 %4, %5
  %6 = load i32, i32* %total, align 4
  %add1 = add nsw i32 %6, %add
  store i32 %add1, i32* %total, align 4
  br label %for.inc

for.inc:                                          ; preds = %for.body
  %7 = load i32, i32* %i, align 4
  %inc = add nsw i32 %7, 1
  store i32 %inc, i32* %i, align 4
  br label %for.cond

for.end:                                          ; preds = %for.cond
  %8 = load i32, i32* %total, align 4
  ret i32 %8
}

; Function Attrs: noinline nounwind uwtable
define dso_local i32 @lookup(i32 %index) #0 {
entry:
  %index.addr = alloca i32, align 4
  store i32 %index, i32* %index.addr, align 4
  %0 = load i32, i32* %index.addr, align 4
  %and = and i32 %0, 3
  %idxprom = zext i32 %and to i64
  %arrayidx = getelementptr inbounds [4 x i32], [4 x i32]* @table, i64 0, i64 %idxprom
  %1 = load i32, i32* %arrayidx, align 4
  %2 = bitcast i32* %arrayidx to i8*
  call void @touch(i8* %2)
  ret i32 %1
}

declare void @touch(i8*) #1

attributes #0 = { noinline nounwind uwtable "frame-pointer"="all" }
attributes #1 = { "frame-pointer"="all" }

!llvm.module.flags = !{!0}
!llvm.ident = !{!1}

!0 = !{i32 1, !"wchar_size", i32 4}
!1 = !{!"clang version 14.0.6"}
