define dso_local double @mean(ptr nocapture noundef readonly %0, i32 noundef %1) local_unnamed_addr #0 !dbg !10 {
  %3 = icmp sgt i32 %1, 0, !dbg !25
  br i1 %3, label %4, label %25, !dbg !27
  %5 = zext nneg i32 %1 to i64, !dbg !25
  %6 = and i64 %5, 7, !dbg !27
  %7 = icmp ult i32 %1, 8, !dbg !27
  br i1 %7, label %10, label %8, !dbg !27
  %9 = and i64 %5, 2147483640, !dbg !27
  br label %31, !dbg !27
  %11 = phi double [ poison, %4 ], [ %65, %31 ]
  %12 = phi i64 [ 0, %4 ], [ %66, %31 ]
  %13 = phi double [ 0.000000e+00, %4 ], [ %65, %31 ]
  %14 = icmp eq i64 %6, 0, !dbg !27
  br i1 %14, label %25, label %15, !dbg !27
  %16 = phi i64  %17 = phi double [ %21, %15 ], [ %13, %10 ]
  %18 = phi i64 [ %23, %15 ], [ 0, %10 ]
  %19 = getelementptr inbounds double, ptr %0, i64 %16, !dbg !28
  %20 = load double, ptr %19, align 8, !dbg !28, !tbaa !29
  %21 = fadd double %17, %20, !dbg !33
  , !dbg !34
  %23 = add i64 %18, 1, !dbg !27
  %24 = icmp eq i64 %23, %6, !dbg !27
  br i1 %24, label %25, label %15, !dbg !27, !llvm.loop !35
  %26 = phi double [ 0.000000e+00, %2 ], [ %11, %10 ], [ %21, %15 ], !dbg !23
  %27 = icmp eq i32 %1, 0, !dbg !37
  %28 = sitofp i32 %1 to double, !dbg !37
  %29 = fdiv double %26, %28, !dbg !37
  %30 = select i1 %27, double 0.000000e+00, double %29, !dbg !37
  ret double %30, !dbg !38
  %32 = phi i64 [ 0, %8 ], [ %66, %31 ]
  %33 = phi double [ 0.000000e+00, %8 ], [ %65, %31 ]
  %34 = phi i64 [ 0, %8 ], [ %67, %31 ]
  %35 = getelementptr inbounds double, ptr %0, i64 %32, !dbg !28
  %36 = load double, ptr %35, align 8, !dbg !28, !tbaa !29
  %37 = fadd double %33, %36, !dbg !33
  , !dbg !34
  %39 = getelementptr inbounds double, ptr %0load double, ptr %39, align 8, !dbg !28, !tbaa !29
  %41 = fadd double %37, %40, !dbg !33
  %42 = or disjoint i64 %32, 2, !dbg !34
  %43 = getelementptr inbounds double, ptr %0, i64 %42, !dbg !28
  %44 = load double, ptr %43, align 8, !dbg !28, !tbaa !29
  %45 = fadd double %41, %44, !dbg !33
  %46 = or disjoint i64 %32, 3, !dbg !34
  %47 = getelementptr inbounds double, ptr %0, i64 %46, !dbg !28
  %48 = load double, ptr %47, align 8, !dbg !28, !tbaa !29
  %49 = fadd double %45, %48, !dbg !33
  %50 = or disjoint i64 %32, 4, !dbg !34
  %51 = getelementptr inbounds double, ptr %0, i64 %50, !dbg !28
  %52 = load double, ptr %51, align 8, !dbg !28, !tbaa !29
  %53 = fadd double %49, %52, !dbg !33
  %54 = or disjoint i64 %32, 5, !dbg !34
  %55 = getelementptr inbounds double, ptr %0, i64 %54, !dbg !28
  %56 = load double, ptr %55, align 8, !dbg !28, !tbaa !29
  %57 = fadd double %53, %56, !dbg !33
  %58 = or disjoint i64 %32, 6, !dbg !34
  %59 = getelementptr inbounds double, ptr %0, i64 %58, !dbg !28
  %60 = load double, ptr %59, align 8, !dbg !28, !tbaa !29
  %61 = fadd double %57, %60, !dbg !33
  %62 = or disjoint i64 %32, 7, !dbg !34
  %63 = getelementptr inbounds double, ptr %0, i64 %62, !dbg !28
  %64 = load double, ptr %63, align 8, !dbg !28, !tbaa !29
  %65 = fadd double %61, %64, !dbg !33
  %66 = add nuw nsw i64 %32, 8, !dbg !34
  %67 = add i64 %34, 8, !dbg !27
  %68 = icmp eq i64 %67, %9, !dbg !27
  br i1 %68, label %10, label %31, !dbg !27, !llvm.loop !39
}
define dso_local float @horner(ptr nocapture noundef readonly %0, i32 noundef %1, float noundef %2) local_unnamed_addr #0 !dbg !42 {
  %4 = sext i32 %1 to i64, !dbg !56
  %5 = getelementptr inbounds float, ptr %0, i64 %4, !dbg !56
  %6 = load float, ptr %5, align 4, !dbg !56, !tbaa !57
  %7 = icmp sgt i32 %1, 0, !dbg !60
  br i1 %7, label %8, label %30, !dbg !62
  %9 = zext nneg i32 %1 to i64, !dbg !62
  %10 = and i64 %9, 3, !dbg !62
  %11 = icmp eq i64 %10, 0, !dbg !62
  br i1 %11, label %22, label %12, !dbg !62
  %13 = phi i64 [ %16, %12 ], [ %9, %8 ]
  %14 = phi float [ %19, %12 ], [ %6, %8 ]
  %15 = phi i64 [ %20, %12 ], [ 0, %8 ]
  %16 = add nsw i64 %13, -1, !dbg !63
  %17 = getelementptr inbounds float, ptr %0, i64 %16, !dbg !64
  %18 = load float, ptr %17, align 4, !dbg !64, !tbaa !57
  %19 = tail call float @llvm.fmuladd.f32(float %14, float %2, float %18), !dbg !65
  %20 = add i64 %15, 1, !dbg !62
  %21 = icmp eq i64 %20, %10, !dbg !62
  br i1 %21, label %22, label %12, !dbg !62, !llvm.loop !66
  %23 = phi i64 [ %9, %8 ], [ %16, %12 ]
  %24 = phi float [ %6, %8 ], [ %19, %12 ]
  %25 = phi float [ poison, %8 ], [ %19, %12 ]
  %26 = icmp ult i32 %1, 4, !dbg !62
  br i1 %26, label %30, label %27, !dbg !62
  %28 = getelementptr i8, ptr %0, i64 -4, !dbg !62
  %29 = getelementptr i8, ptr %0, i64 -8, !dbg !62
  br label %32, !dbg !62
  %31 = phi float [ %6, %3 ], [ %25, %22 ], [ %48, %32 ], !dbg !55
  ret float %31, !dbg !67
  %33 = phi i64 [ %23, %27 ], [ %45, %32 ]
  %34 = phi float [ %24, %27 ], [ %48, %32 ]
  %35 = getelementptr float, ptr %28, i64 %33, !dbg !64
  %36 = load float, ptr %35, align 4, !dbg !64, !tbaa !57
  %37 = tail call float @llvm.fmuladd.f32(float %34, float %2, float %36), !dbg !65
  %38 = getelementptr float, ptr %29, i64 %33, !dbg !64
  %39 = load float, ptr %38, align 4, !dbg !64, !tbaa !57
  %40 = tail call float @llvm.fmuladd.f32(float %37, float %2, float %39), !dbg !65
  %41 = add nsw i64 %33, -3, !dbg !63
  %42 = getelementptr inbounds float, ptr %0, i64 %41, !dbg !64
  %43 = load float, ptr %42, align 4, !dbg !64, !tbaa !57
  %44 = tail call float @llvm.fmuladd.f32(float %40, float %2, float %43), !dbg !65
  %45 = add nsw i64 %33, -4, !dbg !63
  %46 = getelementptr inbounds float, ptr %0, i64 %45, !dbg !64
  %47 = load float, ptr %46, align 4, !dbg !64, !tbaa !57
  %48 = tail call float @llvm.fmuladd.f32(float %44, float %2, float %47), !dbg !65
  %49 = icmp ugt i64 %41, 1, !dbg !60
  br i1 %49, label %32, label %30, !dbg !62, !llvm.loop !68
}
define dso_local double @newton_sqrt(double noundef %0) local_unnamed_addr #2 !dbg !70 {
  %2 = fcmp ogt double %0, 1.000000e+00, !dbg !79
  %3 = fmul double %0, 5.000000e-01, !dbg !80
  %4 = select i1 %2, double %3, double 1.000000e+00, !dbg !80
  %5 = fdiv double %0, %4, !dbg !82
  %6 = fadd double %4, %5, !dbg !84
  %7 = fmul double %6, 5.000000e-01, !dbg !85
  %8 = fdiv double %0, %7, !dbg !82
  %9 = fadd double %7, %8, !dbg !84
  %10 = fmul double %9, 5.000000e-01, !dbg !85
  %11 = fdiv double %0, %10, !dbg !82
  %12 = fadd double %10, %11, !dbg !84
  %13 = fmul double %12, 5.000000e-01, !dbg !85
  %14 = fdiv double %0, %13, !dbg !82
  %15 = fadd double %13, %14, !dbg !84
  %16 = fmul double %15, 5.000000e-01, !dbg !85
  %17 = fdiv double %0, %16, !dbg !82
  %18 = fadd double %16, %17, !dbg !84
  %19 = fmul double %18, 5.000000e-01, !dbg !85
  %20 = fdiv double %0, %19, !dbg !82
  %21 = fadd double %19, %20, !dbg !84
  %22 = fmul double %21, 5.000000e-01, !dbg !85
  %23 = fdiv double %0, %22, !dbg !82
  %24 = fadd double %22, %23, !dbg !84
  %25 = fmul double %24, 5.000000e-01, !dbg !85
  %26 = fdiv double %0, %25, !dbg !82
  %27 = fadd double %25, %26, !dbg !84
  %28 = fmul double %27, 5.000000e-01, !dbg !85
  %29 = fdiv double %0, %28, !dbg !82
  %30 = fadd double %28, %29, !dbg !84
  %31 = fmul double %30, 5.000000e-01, !dbg !85
  %32 = fdiv double %0, %31, !dbg !82
  %33 = fadd double %31, %32, !dbg !84
  %34 = fmul double %33, 5.000000e-01, !dbg !85
  %35 = fdiv double %0, %34, !dbg !82
  %36 = fadd double %34, %35, !dbg !84
  %37 = fmul double %36, 5.0fdiv double %0, %37, !dbg !82
  %39 = fadd double %37, %38, !dbg !84
  %40 = fmul double %39, 5.000000e-01, !dbg !85
  %41 = fdiv double %0, %40, !dbg !82
  %42 = fadd double %40, %41, !dbg !84
  %43 = fmul double %42, 5.000000e-01, !dbg !85
  %44 = fdiv double %0, %43, !dbg !82
  %45 = fadd double %43, %44, !dbg !84
  %46 = fmul double %45, 5.000000e-01, !dbg !85
  %47 = fdiv double %0, %46, !dbg !82
  %48 = fadd double %46, %47, !dbg !84
  %49 = fmul double %48, 5.000000e-01, !dbg !85
  %50 = fdiv double %0, %49, !dbg !82
  %51 = fadd double %49, %50, !dbg !84
  %52 = fmul double %51, 5.000000e-01, !dbg !85
  %53 = fdiv double %0, %52, !dbg !82
  %54 = fadd double %52, %53, !dbg !84
  %55 = fmul double %54, 5.000000e-01, !dbg !85
  %56 = fdiv double %0, %55, !dbg !82
  %57 = fadd double %55, %56, !dbg !84
  %58 = fmul double %57, 5.000000e-01, !dbg !85
  %59 = fdiv double %0, %58, !dbg !82
  %60 = fadd double %58, %59, !dbg !84
  %61 = fmul double %60, 5.000000e-01, !dbg !85
  %62 = fdiv double %0, %61, !dbg !82
  %63 = fadd double %61, %62, !dbg !84
  %64 = fmul double %63, 5.000000e-01, !dbg !85
  ret double %64, !dbg !86
}
define dso_local void @matmul(i32 noundef %0, ptr noundef %1, ptr noundef %2, ptr noundef %3) #0 {
  %7 = alloca ptr, align 8
  %11 = alloca i32, align 4
  %13 = alloca i32, align 4
  br label %14
  br label %20
20:            br label %68
25:                   ; preds = %20
  br label %55
  %41 = load ptr, ptr %7, align 8, !tbaa !11
  br label %26, !llvm.loop !15
55:                                               ; preds = %30
  %66 = load i32, ptr %11, align 4, !tbaa !5
  %67 = add nsw i32 %66, 1
  br label %20, !llvm.loop !16
  br label %14, !llvm.loop !17
}
!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "tests/data/c/floating.c", directory: "/work/main", checksumkind: CSK_MD5, checksum: "718dc213861a86378de93dce75318452")
!5 = !{i32 8, !"PIC Level", i32 2}
!10 = distinct !DISubprogram(name: "mean", scope: !1, file: !1, line: 2, type: !11, scopeLine: 2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !17)
!11 = !DISubroutineType(types: !12)
!12 = !{!13, !14, !16}
!13 = !DIBasicType(name: "double", size: 64, encoding: DW_ATE_float)
!14 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !15, size: 64)
!15 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !13)
!16 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!17 = !{!18, !19, !20, !21}
!18 = !DILocalVariable(name: "values", arg: 1, scope: !10, file: !1, line: 2, type: !14)
!19 = !DILocalVariable(name: "count", arg: 2, scope: !10, file: !1, line: 2, type: !16)
!20 = !DILocalVariable(name: "total", scope: !10, file: !1, line: 3, type: !13)
!21 = !DILocalVariable(name: "i", scope: !22, file: !1, line: 4, type: !16)
!22 = distinct !DILexicalBlock(scope: !10, file: !1, line: 4, column: 5)
!23 = !DILocation(line: 0, scope: !10)
!25 = !DILocation(line: 4, column: 23, scope: !26)
!26 = distinct !DILexicalBlock(scope: !22, file: !1, line: 4, column: 5)
!27 = !DILocation(line: 4, column: 5, scope: !22)
!28 = !DILocation(line: 5, column: 18, scope: !26)
!29 = !{!30, !30, i64 0}
!30 = !{!"double", !31, i64 0}
!31 = !{!"omnipotent char", !32, i64 0}
!32 = !{!"Simple C/C++ TBAA"}
!33 = !DILocation(line: 5, column: 15, scope: !26)
!34 = !DILocation(line: 4, column: 33, scope: !26)
!35 = distinct !{!35, !36}
!36 = !{!"llvm.loop.unroll.disable"}
!37 = !DILocation(line: 6, column: 12, scope: !10)
!38 = !DILocation(line: 6, column: 5, scope: !10)
!39 = distinct !DILocation(line: 5, column: 26, scope: !22)
!41 = !{!"llvm.loop.mustprogress"}
!42 = distinct !DISubprogram(name: "horner", scope: !1, file: !1, line: 9, type: !43, scopeLine: 9, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !48)
!43 = !DISubroutineType(types: !44)
!44 = !{!45, !46, !16, !45}
!45 = !DIBasicType(name: "float", size: 32, encoding: DW_ATE_float)
!46 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !47, size: 64)
!47 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !45)
!48 = !{!49, !50, !51, !52, !53}
!49 = !DILocalVariable(name: "coefficients", arg: 1, scope: !42, file: !1, line: 9, type: !46)
!50 = !DILocalVariable(name: "degree", arg: 2, scope: !42, file: !1, line: 9, type: !16)
!51 = !DILocalVariable(name: "x", arg: 3, scope: !42, file: !1, line: 9, type: !45)
!52 = !DILocalVariable(name: "result", scope: !42, file: !1, line: 10, type: !45)
!53 = !DILocalVariable(name: "i", scope: !54, file: !1, line: 11, type: !16)
!54 = distinct !DILexicalBlock(scope: !42, file: !1, line: 11, column: 5)
!55 = !DILocation(line: 0, scope: !42)
!56 = !DILocation(line: 10, column: 20, scope: !42)
!57 = !{!58, !58, i64 0}
!58 = !{!"float", !31, i64 0}
!60 = !DILocation(line: 11, column: 32, scope: !61)
!61 = distinct !DILexicalBlock(scope: !54, file: !1, line: 11, column: 5)
!62 = !DILocation(line: 11, column: 5, scope: !54)
!63 = !DILocation(line: 11, scope: !54)
!64 = !DILocation(line: 12, column: 31, scope: !61)
!65 = !DILocation(line: 12, column: 29, scope: !61)
!66 = distinct !{!66, !36}
!67 = !DILocation(line: 13, column: 5, scope: !42)
!68 = distinct !{!68, !62, !69, !41}
!69 = !DILocation(line: 12, column: 45, scope: !54)
!70 = distinct !DISubprogram(name: "newton_sqrt", scope: !1, file: !1, line: 16, type: !71, scopeLine: 16, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !73)
!71 = !DISubroutineType(types: !72)
!72 = !{!13, !13}
!73 = !{!74, !75, !76}
!74 = !DILocalVariable(name: "value", arg: 1, scope: !70, file: !1, line: 16, type: !13)
!75 = !DILocalVariable(name: "guess", scope: !70, file: !1, line: 17, type: !13)
!76 = !DILocalVariable(name: "step", scope: !77, file: !1, line: 18, type: !16)
!77 = distinct !DILexicalBlock(scope: !70, file: !1, line: 18, column: 5)
!79 = !DILocation(line: 17, column: 26, scope: !70)
!80 = !DILocation(line: 17, column: 20, scope: !70)
!82 = !DILocation(line: 19, column: 38, scope: !83)
!83 = distinct !DILexicalBlock(scope: !77, file: !1, line: 18, column: 5)
!84 = !DILocation(line: 19, column: 30, scope: !83)
!85 = !DILocation(line: 19, column: 21, scope: !83)
!86 = !DILocation(line: 20, column: 5, scope: !70)
!87 = distinct !DISubprogram(name: "clamp", scope: !1, file: !1, line: 23, type: !88, scopeLine: 23, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !90)
!88 = !DISubroutineType(types: !89)
!89 = !{!45, !45, !45, !45}
!90 = !{!91, !92, !93}
!91 = !DILocalVariable(name: "x", arg: 1, scope: !87, file: !1, line: 23, type: !45)
!92 = !DILocalVariable(name: "low", arg: 2, scope: !87, file: !1, line: 23, type: !45)
!93 = !DILocalVariable(name: "high", arg: 3, scope: !87, file: !1, line: 23, type: !45)