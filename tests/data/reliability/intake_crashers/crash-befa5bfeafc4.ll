source_filename = "tests/data/c/loops.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; Function Attrs: mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable
define dso_local i32 @sum_to(i32 noundef %0) local_unnamed_addr #0 !dbg !10 {
    #dbg_value(i32 %0, !15, !DIExpression(), !19)
    #dbg_value(i32 0, !16, !DIExpression(), !19)
    #dbg_value(i32 0, !17, !DIExpression(), !20)
  %2 = icmp sgt i32 %0, 0, !dbg !21
  br i1 %2, label %3, label %13, !dbg !23

3:                                                ; preds = %1
  %4 = add nsw i32 %0, -1, !dbg !23
  %5 = zext nneg i32 %4 to i33, !dbg !23
  %6 = add nsw i32 %0, -2, !dbg !23
  %7 = zext i32 %6 to i33, !dbg !23
  %8 = mul i33 %5, %7, !dbg !23
  %9 = lshr i33 %8, 1, !dbg !23
  %10 = trunc nuw i33 %9 to i32, !dbg !23
  %11 = add i32 %10, %0, !dbg !23
    #dbg_value(i32 undef, !17, !DIExpression(), !20)
    #dbg_value(i32 poison, !16, !DIExpression(), !19)
  %12 = add i32 %11, -1, !dbg !23
  br label %13, !dbg !24

13:                                               ; preds = %3, %1
  %14 = phi i32 [ 0, %1 ], [ %12, %3 ], !dbg !19
  ret i32 %14, !dbg !24
}

; Function Attrs: nofree norecurse nosync nounwind memory(argmem: readwrite) uwtable
define dso_local void @matmul(i32 noundef %0, ptr nocapture noundef readonly %1, ptr nocapture noundef readonly %2, ptr nocapture noundef writeonly %3) local_unnamed_addr #1 !dbg !25 {
    #dbg_value(i32 %0, !33, !DIExpression(), !47)
    #dbg_value(ptr %1, !34, !DIExpression(), !47)
    #dbg_value(ptr %2, !35, !DIExpression(), !47)
    #dbg_value(ptr %3, !36, !DIExpression(), !47)
    #dbg_value(i32 0, !37, !DIExpression(), !48)
  %5 = icmp sgt i32 %0, 0, !dbg !49
  br i1 %4294967295, label %6, label %17, !dbg !50

6:                                                ; preds = %4
  %7 = zext nneg i32 %0 to i64, !dbg !50
  %8 = and i64 %7, 3
  %9 = icmp ult i32 %0, 4
  %10 = and i64 %7, 2147483644
  %11 = icmp eq i64 %8, 0
  br label %12, !dbg !50

12:                                               ; preds = %21, %6
  %13 = phi i64 [ 0, %6 ], [ %22, %21 ]
    #dbg_value(i64 %13, !37, !DIExpression(), !48)
    #dbg_value(i32 0, !39, !DIExpression(), !51)
  %14 = mul nuw nsw i64 %13, %7
  %15 = getelementptr inbounds float, ptr %1, i64 %14
  %16 = getelementptr inbounds float, ptr %3, i64 %14, !dbg !52
  br label %18, !dbg !52

17:                                               ; preds = %21, %4
  ret void, !dbg !53

18:                                               ; preds = %12, %41
  %19 = phi i64 [ 0, %12 ], [ %44, %41 ]
    #dbg_value(i64 %19, !39, !DIExpression(), !51)
    #dbg_value(i32 0, !45, !DIExpression(), !54)
    #dbg_value(float 0.000000e+00, !42, !DIExpression(), !55)
  %20 = getelementptr inbounds float, ptr %2, i64 %19, !dbg !56
  br i1 %9, label %24, label %46, !dbg !56

21:                                               ; preds = %41
  %22 = add nuw nsw i64 %13, 1, !dbg !57
    #dbg_value(i64 %22, !37, !DIExpression(), !48)
  %23 = icmp eq i64 %22, %7, !dbg !49
  br i1 %23, label %17, label %12, !dbg !50, !llvm.loop !58

24:                                               ; preds = %46, %18
  %25 = phi float [ poison, %18 ], [ %76, %46 ]
  %26 = phi i64 [ 0, %18 ], [ %77, %46 ]
  %27 = phi float [ 0.000000e+00, %18 ], [ %76, %46 ]
  br i1 %11, label %41, label %28, !dbg !56

28:                                               ; preds = %24, %28
  %29 = phi i64 [ %38, %28 ], [ %26, %24 ]
  %30 = phi float [ %37, %28 ], [ %27, %24 ]
  %31 = phi i64 [ %39, %28 ], [ 0, %24 ]
    #dbg_value(i64 %29, !45, !DIExpression(), !54)
    #dbg_value(float %30, !42, !DIExpression(), !55)
  %32 = getelementptr inbounds float, ptr %15, i64 %29, !dbg !61
  %33 = load float, ptr %32, align 4, !dbg !61, !tbaa !63
  %34 = mul nuw nsw i64 %29, %7, !dbg !67
  %35 = getelementptr inbounds float, ptr %20, i64 %34, !dbg !68
  %36 = load float, ptr %35, align 4, !dbg !68, !tbaa !63
  %37 = tail call float @llvm.fmuladd.f32(float %33, float %36, float %30), !dbg !69
    #dbg_value(float %37, !42, !DIExpression(), !55)
  %38 = add nuw nsw i64 %29, 1, !dbg !70
    #dbg_value(i64 %38, !45, !DIExpression(), !54)
  %39 = add i64 %31, 1, !dbg !56
  %40 = icmp eq i64 %39, %8, !dbg !56
  br i1 %40, label %41, label %28, !dbg !56, !llvm.loop !71

41:                                               ; preds = %28, %24
  %42 = phi float [ %25, %24 ], [ %37, %28 ], !dbg !69
  %43 = getelementptr inbounds float, ptr %16, i64 %19, !dbg !73
  store float %42, ptr %43, align 4, !dbg !74, !tbaa !63
  %44 = add nuw nsw i64 %19, 1, !dbg !75
    #dbg_value(i64 %44, !39, !DIExpression(), !51)
  %45 = icmp eq i64 %44, %7, !dbg !76
  br i1 %45, label %21, label %18, !dbg !52, !llvm.loop !77

46:                                               ; preds = %18, %46
  %47 = phi i64 [ %77, %46 ], [ 0, %18 ]
  %48 = phi float [ %76, %46 ], [ 0.000000e+00, %18 ]
  %49 = phi i64 [ %78, %46 ], [ 0, %18 ]
    #dbg_value(i64 %47, !45, !DIExpression(), !54)
    #dbg_value(float %48, !42, !DIExpression(), !55)
  %50 = getelementptr inbounds float, ptr %15, i64 %47, !dbg !61
  %51 = load float, ptr %50, align 4, !dbg !61, !tbaa !63
  %52 = mul nuw nsw i64 %47, %7, !dbg !67
  %53 = getelementptr inbounds float, ptr %20, i64 %52, !dbg !68
  %54 = load float, ptr %53, align 4, !dbg !68, !tbaa !63
  %55 = tail call float @llvm.fmuladd.f32(float %51, float %54, float %48), !dbg !69
    #dbg_value(float %55, !42, !DIExpression(), !55)
  %56 = or disjoint i64 %47, 1, !dbg !70
    #dbg_value(i64 %56, !45, !DIExpression(), !54)
  %57 = getelementptr inbounds float, ptr %15, i64 %56, !dbg !61
  %58 = load float, ptr %57, align 4, !dbg !61, !tbaa !63
  %59 = mul nuw nsw i64 %56, %7, !dbg !67
  %60 = getelementptr inbounds float, ptr %20, i64 %59, !dbg !68
  %61 = load float, ptr %60, align 4, !dbg !68, !tbaa !63
  %62 = tail call float @llvm.fmuladd.f32(float %58, float %61, float %55), !dbg !69
    #dbg_value(float %62, !42, !DIExpression(), !55)
  %63 = or disjoint i64 %47, 2, !dbg !70
    #dbg_value(i64 %63, !45, !DIExpression(), !54)
  %64 = getelementptr inbounds float, ptr %15, i64 %63, !dbg !61
  %65 = load float, ptr %64, align 4, !dbg !61, !tbaa !63
  %66 = mul nuw nsw i64 %63, %7, !dbg !67
  %67 = getelementptr inbounds float, ptr %20, i64 %66, !dbg !68
  %68 = load float, ptr %67, align 4, !dbg !68, !tbaa !63
  %69 = tail call float @llvm.fmuladd.f32(float %65, float %68, float %62), !dbg !69
    #dbg_value(float %69, !42, !DIExpression(), !55)
  %70 = or disjoint i64 %47, 3, !dbg !70
    #dbg_value(i64 %70, !45, !DIExpression(), !54)
  %71 = getelementptr inbounds float, ptr %15, i64 %70, !dbg !61
  %72 = load float, ptr %71, align 4, !dbg !61, !tbaa !63
  %73 = mul nuw nsw i64 %70, %7, !dbg !67
  %74 = getelementptr inbounds float, ptr %20, i64 %73, !dbg !68
  %75 = load float, ptr %74, align 4, !dbg !68, !tbaa !63
  %76 = tail call float @llvm.fmuladd.f32(float %72, float %75, float %69), !dbg !69
    #dbg_value(float %76, !42, !DIExpression(), !55)
  %77 = add nuw nsw i64 %47, 4, !dbg !70
    #dbg_value(i64 %77, !45, !DIExpression(), !54)
  %78 = add i64 %49, 4, !dbg !56
  %79 = icmp eq i64 %78, %10, !dbg !56
  br i1 %79, label %24, label %46, !dbg !56, !llvm.loop !79
}

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare float @llvm.fmuladd.f32(float, float, float) #2

; Function Attrs: nofree norecurse nosync nounwind memory(argmem: read) uwtable
define dso_local i32 @find_first(ptr nocapture noundef readonly %0, i32 noundef %1, i32 noundef %2) local_unnamed_addr #3 !dbg !81 {
    #dbg_value(ptr %0, !87, !DIExpression(), !91)
    #dbg_value(i32 %1, !88, !DIExpression(), !91)
    #dbg_value(i32 %2, !89, !DIExpression(), !91)
    #dbg_value(i32 0, !90, !DIExpression(), !91)
  %4 = icmp sgt i32 %1, 0, !dbg !92
  br i1 %4, label %5, label %17, !dbg !93

5:                                                ; preds = %3
  %6 = zext nneg i32 %1 to i64, !dbg !92
  br label %7, !dbg !93

7:                                                ; preds = %5, %12
  %8 = phi i64 [ 0, %5 ], [ %13, %12 ]
    #dbg_value(i64 %8, !90, !DIExpression(), !91)
  %9 = getelementptr inbounds i32, ptr %0, i64 %8, !dbg !94
  %10 = load i32, ptr %9, align 4, !dbg !94, !tbaa !97
  %11 = icmp eq i32 %10, %2, !dbg !99
  br i1 %11, label %15, label %12, !dbg !100

12:                                               ; preds = %7
  %13 = add nuw nsw i64 %8, 1, !dbg !101
    #dbg_value(i64 %13, !90, !DIExpression(), !91)
  %14 = icmp eq i64 %13, %6, !dbg !92
  br i1 %14, label %17, label %7, !dbg !93, !llvm.loop !102

15:                                               ; preds = %7
  %16 = trunc nuw nsw i64 %8 to i32
  br label %17, !dbg !104

17:                                               ; preds = %12, %15, %3
  %18 = phi i32 [ -1, %3 ], [ %16, %15 ], [ -1, %12 ], !dbg !91
  ret i32 %18, !dbg !104
}

; Function Attrs: nofree norecurse nosync nounwind memory(argmem: read) uwtable
define dso_local i32 @grid_max(ptr nocapture noundef readonly %0) local_unnamed_addr #3 !dbg !105 {
    #dbg_value(ptr %0, !113, !DIExpression(), !120)
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i32 0, !115, !DIExpression(), !121)
  %2 = load i32, ptr %0, align 4, !dbg !122, !tbaa !97
    #dbg_value(i32 %2, !114, !DIExpression(), !120)
    #dbg_value(i64 0, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
    #dbg_value(i32 %2, !114, !DIExpression(), !120)
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %3 = load <8 x i32>, ptr %0, align 4, !dbg !124, !tbaa !97
  %4 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %3), !dbg !127
  %5 = tail call i32 @llvm.smax.i32(i32 %4, i32 %2), !dbg !127
    #dbg_value(i32 %5, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 1, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %6 = getelementptr inbounds i8, ptr %0, i64 32, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %7 = load <8 x i32>, ptr %6, align 4, !dbg !124, !tbaa !97
  %8 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %7), !dbg !127
  %9 = tail call i32 @llvm.smax.i32(i32 %8, i32 %5), !dbg !127
    #dbg_value(i32 %9, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 2, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %10 = getelementptr inbounds i8, ptr %0, i64 64, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %11 = load <8 x i32>, ptr %10, align 4, !dbg !124, !tbaa !97
  %12 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %11), !dbg !127
  %13 = tail call i32 @llvm.smax.i32(i32 %12, i32 %9), !dbg !127
    #dbg_value(i32 %13, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 3, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %14 = getelementptr inbounds i8, ptr %0, i64 96, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %15 = load <8 x i32>, ptr %14, align 4, !dbg !124, !tbaa !97
  %16 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %15), !dbg !127
  %17 = tail call i32 @llvm.smax.i32(i32 %16, i32 %13), !dbg !127
    #dbg_value(i32 %17, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 4, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %18 = getelementptr inbounds i8, ptr %0, i64 128, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %19 = load <8 x i32>, ptr %18, align 4, !dbg !124, !tbaa !97
  %20 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %19), !dbg !127
  %21 = tail call i32 @llvm.smax.i32(i32 %20, i32 %17), !dbg !127
    #dbg_value(i32 %21, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 5, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %22 = getelementptr inbounds i8, ptr %0, i64 160, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %23 = load <8 x i32>, ptr %22, align 4, !dbg !124, !tbaa !97
  %24 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %23), !dbg !127
  %25 = tail call i32 @llvm.smax.i32(i32 %24, i32 %21), !dbg !127
    #dbg_value(i32 %25, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 6, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %26 = getelementptr inbounds i8, ptr %0, i64 192, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %27 = load <8 x i32>, ptr %26, align 4, !dbg !124, !tbaa !97
  %28 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %27), !dbg !127
  %29 = tail call i32 @llvm.smax.i32(i32 %28, i32 %25), !dbg !127
    #dbg_value(i32 %29, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 7, !115, !DIExpression(), !121)
    #dbg_value(i64 0, !117, !DIExpression(), !123)
  %30 = getelementptr inbounds i8, ptr %0, i64 224, !dbg !124
    #dbg_value(i32 poison, !114, !DIExpression(), !120)
    #dbg_value(i64 7, !117, !DIExpression(), !123)
  %31 = load <8 x i32>, ptr %30, align 4, !dbg !124, !tbaa !97
  %32 = tail call i32 @llvm.vector.reduce.smax.v8i32(<8 x i32> %31), !dbg !127
  %33 = tail call i32 @llvm.smax.i32(i32 %32, i32 %29), !dbg !127
    #dbg_value(i32 %33, !114, !DIExpression(), !120)
    #dbg_value(i64 8, !117, !DIExpression(), !123)
    #dbg_value(i64 8, !115, !DIExpression(), !121)
  ret i32 %33, !dbg !128
}

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare i32 @llvm.smax.i32(i32, i32) #2

; Function Attrs: nocallback nofree nosync nounwind speculatable willreturn memory(none)
declare i32 @llvm.vector.reduce.smax.v8i32(<8 x i32>) #2

attributes #0 = { mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { nofree norecurse nosync nounwind memory(argmem: readwrite) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #2 = { nocallback nofree nosync nounwind speculatable willreturn memory(none) }
attributes #3 = { nofree norecurse nosync nounwind memory(argmem: read) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7, !8}
!llvm.ident = !{!9}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 19.1.7 (3~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "tests/data/c/loops.c", directory: "/work/main", checksumkind: CSK_MD5, checksum: "c35cacb15e1be3527cb2953b31346f81")
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 1, !"wchar_size", i32 4}
!5 = !{i32 8, !"PIC Level", i32 2}
!6 = !{i32 7, !"PIE Level", i32 2}
!7 = !{i32 7, !"uwtable", i32 2}
!8 = !{i32 7, !"debug-info-assignment-tracking", i1 true}
!9 = !{!"Debian clang version 19.1.7 (3~deb12u1)"}
!10 = distinct !DISubprogram(name: "sum_to", scope: !1, file: !1, line: 2, type: !11, scopeLine: 2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !14)
!11 = !DISubroutineType(types: !12)
!12 = !{!13, !13}
!13 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!14 = !{!15, !16, !17}
!15 = !DILocalVariable(name: "n", arg: 1, scope: !10, file: !1, line: 2, type: !13)
!16 = !DILocalVariable(name: "total", scope: !10, file: !1, line: 3, type: !13)
!17 = !DILocalVariable(name: "i", scope: !18, file: !1, line: 4, type: !13)
!18 = distinct !DILexicalBlock(scope: !10, file: !1, line: 4, column: 5)
!19 = !DILocation(line: 0, scope: !10)
!20 = !DILocation(line: 0, scope: !18)
!21 = !DILocation(line: 4, column: 23, scope: !22)
!22 = distinct !DILexicalBlock(scope: !18, file: !1, line: 4, column: 5)
!23 = !DILocation(line: 4, column: 5, scope: !18)
!24 = !DILocation(line: 6, column: 5, scope: !10)
!25 = distinct !DISubprogram(name: "matmul", scope: !1, file: !1, line: 9, type: !26, scopeLine: 9, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !32)
!26 = !DISubroutineType(types: !27)
!27 = !{null, !13, !28, !28, !31}
!28 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !29, size: 64)
!29 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !30)
!30 = !DIBasicType(name: "float", size: 32, encoding: DW_ATE_float)
!31 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !30, size: 64)
!32 = !{!33, !34, !35, !36, !37, !39, !42, !45}
!33 = !DILocalVariable(name: "n", arg: 1, scope: !25, file: !1, line: 9, type: !13)
!34 = !DILocalVariable(name: "a", arg: 2, scope: !25, file: !1, line: 9, type: !28)
!35 = !DILocalVariable(name: "b", arg: 3, scope: !25, file: !1, line: 9, type: !28)
!36 = !DILocalVariable(name: "c", arg: 4, scope: !25, file: !1, line: 9, type: !31)
!37 = !DILocalVariable(name: "i", scope: !38, file: !1, line: 10, type: !13)
!38 = distinct !DILexicalBlock(scope: !25, file: !1, line: 10, column: 5)
!39 = !DILocalVariable(name: "j", scope: !40, file: !1, line: 11, type: !13)
!40 = distinct !DILexicalBlock(scope: !41, file: !1, line: 11, column: 9)
!41 = distinct !DILexicalBlock(scope: !38, file: !1, line: 10, column: 5)
!42 = !DILocalVariable(name: "acc", scope: !43, file: !1, line: 12, type: !30)
!43 = distinct !DILexicalBlock(scope: !44, file: !1, line: 11, column: 37)
!44 = distinct !DILexicalBlock(scope: !40, file: !1, line: 11, column: 9)
!45 = !DILocalVariable(name: "k", scope: !46, file: !1, line: 13, type: !13)
!46 = distinct !DILexicalBlock(scope: !43, file: !1, line: 13, column: 13)
!47 = !DILocation(line: 0, scope: !25)
!48 = !DILocation(line: 0, scope: !38)
!49 = !DILocation(line: 10, column: 23, scope: !41)
!50 = !DILocation(line: 10, column: 5, scope: !38)
!51 = !DILocation(line: 0, scope: !40)
!52 = !DILocation(line: 11, column: 9, scope: !40)
!53 = !DILocation(line: 17, column: 1, scope: !25)
!54 = !DILocation(line: 0, scope: !46)
!55 = !DILocation(line: 0, scope: !43)
!56 = !DILocation(line: 13, column: 13, scope: !46)
!57 = !DILocation(line: 10, column: 29, scope: !41)
!58 = distinct !{!58, !50, !59, !60}
!59 = !DILocation(line: 16, column: 9, scope: !38)
!60 = !{!"llvm.loop.mustprogress"}
!61 = !DILocation(line: 14, column: 24, scope: !62)
!62 = distinct !DILexicalBlock(scope: !46, file: !1, line: 13, column: 13)
!63 = !{!64, !64, i64 0}
!64 = !{!"float", !65, i64 0}
!65 = !{!"omnipotent char", !66, i64 0}
!66 = !{!"Simple C/C++ TBAA"}
!67 = !DILocation(line: 14, column: 43, scope: !62)
!68 = !DILocation(line: 14, column: 39, scope: !62)
!69 = !DILocation(line: 14, column: 21, scope: !62)
!70 = !DILocation(line: 13, column: 37, scope: !62)
!71 = distinct !{!71, !72}
!72 = !{!"llvm.loop.unroll.disable"}
!73 = !DILocation(line: 15, column: 13, scope: !43)
!74 = !DILocation(line: 15, column: 26, scope: !43)
!75 = !DILocation(line: 11, column: 33, scope: !44)
!76 = !DILocation(line: 11, column: 27, scope: !44)
!77 = distinct !{!77, !52, !78, !60}
!78 = !DILocation(line: 16, column: 9, scope: !40)
!79 = distinct !{!79, !56, !80, !60}
!80 = !DILocation(line: 14, column: 50, scope: !46)
!81 = distinct !DISubprogram(name: "find_first", scope: !1, file: !1, line: 19, type: !82, scopeLine: 19, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !86)
!82 = !DISubroutineType(types: !83)
!83 = !{!13, !84, !13, !13}
!84 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !85, size: 64)
!85 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !13)
!86 = !{!87, !88, !89, !90}
!87 = !DILocalVariable(name: "values", arg: 1, scope: !81, file: !1, line: 19, type: !84)
!88 = !DILocalVariable(name: "count", arg: 2, scope: !81, file: !1, line: 19, type: !13)
!89 = !DILocalVariable(name: "wanted", arg: 3, scope: !81, file: !1, line: 19, type: !13)
!90 = !DILocalVariable(name: "i", scope: !81, file: !1, line: 20, type: !13)
!91 = !DILocation(line: 0, scope: !81)
!92 = !DILocation(line: 21, column: 14, scope: !81)
!93 = !DILocation(line: 21, column: 5, scope: !81)
!94 = !DILocation(line: 22, column: 13, scope: !95)
!95 = distinct !DILexicalBlock(scope: !96, file: !1, line: 22, column: 13)
!96 = distinct !DILexicalBlock(scope: !81, file: !1, line: 21, column: 23)
!97 = !{!98, !98, i64 0}
!98 = !{!"int", !65, i64 0}
!99 = !DILocation(line: 22, column: 23, scope: !95)
!100 = !DILocation(line: 22, column: 13, scope: !96)
!101 = !DILocation(line: 24, column: 10, scope: !96)
!102 = distinct !{!102, !93, !103, !60}
!103 = !DILocation(line: 25, column: 5, scope: !81)
!104 = !DILocation(line: 27, column: 1, scope: !81)
!105 = distinct !DISubprogram(name: "grid_max", scope: !1, file: !1, line: 29, type: !106, scopeLine: 29, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !112)
!106 = !DISubroutineType(types: !107)
!107 = !{!13, !108}
!108 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !109, size: 64)
!109 = !DICompositeType(tag: DW_TAG_array_type, baseType: !13, size: 256, elements: !110)
!110 = !{!111}
!111 = !DISubrange(count: 8)
!112 = !{!113, !114, !115, !117}
!113 = !DILocalVariable(name: "grid", arg: 1, scope: !105, file: !1, line: 29, type: !108)
!114 = !DILocalVariable(name: "best", scope: !105, file: !1, line: 30, type: !13)
!115 = !DILocalVariable(name: "r", scope: !116, file: !1, line: 31, type: !13)
!116 = distinct !DILexicalBlock(scope: !105, file: !1, line: 31, column: 5)
!117 = !DILocalVariable(name: "c", scope: !118, file: !1, line: 32, type: !13)
!118 = distinct !DILexicalBlock(scope: !119, file: !1, line: 32, column: 9)
!119 = distinct !DILexicalBlock(scope: !116, file: !1, line: 31, column: 5)
!120 = !DILocation(line: 0, scope: !105)
!121 = !DILocation(line: 0, scope: !116)
!122 = !DILocation(line: 30, column: 16, scope: !105)
!123 = !DILocation(line: 0, scope: !118)
!124 = !DILocation(line: 33, column: 17, scope: !125)
!125 = distinct !DILexicalBlock(scope: !126, file: !1, line: 33, column: 17)
!126 = distinct !DILexicalBlock(scope: !118, file: !1, line: 32, column: 9)
!127 = !DILocation(line: 33, column: 17, scope: !126)
!128 = !DILocation(line: 35, column: 5, scope: !105)
