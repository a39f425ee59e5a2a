define dso_local i32 @sum_to(i32 noundef %0) local_unnamed_addr #0 !dbg !10 {
  %2 = icmp sgt i32 %0, 0, !dbg !21
  br i1 %2, label %3, label %1  %4 = add nsw i32 %0, -1, !dbg !23
  %5 = zext nneg i32 %4 to i33, !dbg !23
  %6 = add nsw i32 %0, -2, !dbg !23
  %7 = zext i32 %6 to i33, !dbg !23
  %8 = mul i33 %5, %7, !dbg !23
  %9 = lshr i33 %8, 1, !dbg !23
  %10 = trunc nuw i33 %9 to i32, !dbg !23
  %11 = add i32 %10, %0, !dbg !23
  %12 = add i32 %11, -1  %14 = phi i32 [ 0, %1  ], !dbg !19
  ret i32 %14, !dbg !24
}
define dso_local void @matmul(i32 noundef %0, ptr nocapture noundef readonly %1, ptr nocapture noundef readonly %2, ptr nocapture noundef writeonly %3) local_unnamed_addr #1 !dbg !25 {
  %5 = icmp sgt i32 %0, 0, !dbg !49
  br i1 %5, label %6, label %17, !dbg !50
  %7 = zext nneg i32 %0 to i64, !dbg !50
  %8 = and i64 %7, 3
  %9 = icmp ult i32 %0, 4
  %10 = and i64 %7, 2147483644
  %11 = icmp eq i64 %8, 0
  br label %12, !dbg !50
  %13 = phi i64 [ 0, %6 ], [ %22, %21 ]
  %14 = mul nuw nsw i64 %13, %7
  %15 = getelementptr inbounds float, ptr %1%16 = getelementptr inbounds float, ptr %3, i64 2
  br label %18, !dbg !52
  ret void, !dbg !53
  %19 = phi i64 [ 0, %12 ], [ %44, %41 ]
  %20 = getelementptr inbounds float, ptr %2, i64 %19, !dbg !56
  br i1 %9, label %24, label %46, !dbg !56
  %22 = add nuw nsw i64 %13, 1, !dbg !57
  %23 = icmp eq i64 %22, %7 br i1 %23, label %17, label %12, !dm.loop !58
  %26 = phi i64 [ 0, %18 ], [ %77, %46 ]
  %27 = phi float [ 0.000000e+0076, %46 ]
  br i1 %11, label %41, label %28, !dbg !56
  %29 = phi i64 [ %38, %28 ], [ %26, %24 ]
  %30 = phi float [ %37, %28 ], [ %27, %24 ]
  %31 = phi i64 [ %39, %28 ]
  %32 = getelementptr inbounds float, ptr %15, i64 %29, !dbg !61
  %33 = load float, ptr %32, align 4, !da !63
  %34 = mul nuw nsw i64 %29, %7, !dbg !67
  %35 = getelementptr inbounds float, ptr %20, i64 %34, !dbg !68
  %36 = load float, ptr %35, align 4, !dbg !68, !tbaa !63
  %37 = tail call float @llvm.fmuladd.f32(float %33, float %36, float %30), !dbg !69
  %38 = add nuw nsw i64 %29, 1, !dbg !70
  %39 = add i64 %31, 1, !dbg !56
  %40 = icmp eq i64 %39, %8, !dbg !56
  br i1 %40, label %41, label %28, !dbg !56, !llvm.loop !71
  %44 = add nuw nsw i64 %19, 1, !dbg !75
  %45 = icmp eq i64 %44, %7, !dbg !76
  br i1 %45, label %21, label %18, !dbg !52, !llvm.loop !77
  %47 = phi i64 [ %77, %18 ]
  %48 = phi float [ %76, %46 ], [ 0.000000e+00, %18 ]
  %49 = phi i64 [ %78, %18 ]
  %50 = getelementptr inbounds float, ptr %15, i64 %47, !dbg !61
  %51 = load float, ptr %50, align 4, !dbg !61, !tbaa !63
  %52 = mul nuw nsw i64 %47, %7, !dbg !67
  %53 = getelementptr inbounds float, ptr %20, i64 %52, !dbg !68
  %54 = load float, ptr %53, align 4, !aa !63
  %55 = tail call float @llvm.fmuladd.f32(float %51, float %54, float %48), !dbg !69
  %56 = or disjoint i64 %47, 1, !dbg !70
  %57 = getelementptr inbounds float, ptr %15, i64 %56, !dbg !61
  %58 = load float, ptr %57, align 4, !dbg!63
  %59 = mul nuw nsw i64 %56, %7, !dbg !67
  %60 = getelementptr inbounds float, ptr %20, i64 %59, !dbg !68
  %61 = load float, ptr %60, align 4, !dbg !6
  %62 = tail call float @llvm.fmuladd.f32(float %58, float %61, float %55), !dbg !69
  %63 = or disjoint i64 %47, 2, !dbg !70
  %64 = getelementptr inbounds float, ptr %15, i64 %63, !dbg !61
  %65 = load float, ptr %64, align 4%66 = mul nuw nsw i64 %63, %7, !dbg !67
  %67 = getelementptr inbounds float, ptr %20, i64 %66, !dbg !68
  %68 = load float, ptr %67, align 4, !aa !63
  %69 = tail call float @llvm.fmuladd.f32(float %65, float %68, float %62), !dbg !69
  %70 = or disjoint i64 %47, 3, !dbg !70
  %71 = getelementptr inbounds float, ptr %15, i64 %70, !dbg !61
  %72 = load float, ptr %71, align 4, !dbg!63
  %73 = mul nuw nsw i64 %70, %7, !dbg !67
  %74 = getelementptr inbounds float, ptr %20, i64 %73, !dbg !68
  %75 = load float, ptr %74, align 4, !dbg !6
  %76 = tail call float @llvm.fmuladd.f32(float %72, float %75, float %69), !dbg !69
  %77 = add nuw nsw i64 %47, 4, !dbg !70
  %78 = add i64 %49, 4, !dbg !56
  %79 = icmp eq i64 %78, %10, !dbg !56
  br i1 %79, label %24, label %46, !dbg !56, !llvm.loop !79
}
define dso_local i32 @find_first(ptr nocapture noundef readonly %0, i32 noundef %1, i32 noundef %2) local_unnamed_addr #3 !dbg !89 {
  %4 = icmp sgt i32 %1, 0, !dbg !92
  br i1 %4, label %5, label %17, !dbg !93
  %6 = zext nneg i32 %1 to i64, !dbg !92
  br label %7, !dbg !93
  %8 = phi i64   %9 = getelementptr inbounds i32, ptr %0, i64 %8, !dbg !94
  %10 = load i32, ptr %9, align 4, !aa !97
  %11 = icmp eq i32 %10, %2, !dbg !99
  br i1 %11, label %15, label %12, !dbg !100
  %13 = add nuw nsw i64 %8, 1, !dbg !101
  %14 = icmp eq i64 %13, %6, !dbg !92
  br i1 %14, label %17, label %7, !vm.loop !102
  %16 = trunc nuw nsw i64 %8 to i32
  br label %17, !dbg !104
  %18 = phi i32 [ -1, %3 ], [ %16, %15 ], [ -1, %12 ], !dbg !91
  ret i32 %18, !dbg !104
}
define i32 @sum(ptr %a, i32 %n) {
  %s = alloca i3%7 = load i32, ptr %s, align 4
  ret i32 %7
}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7, !8}
!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: ! "Debian cla12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "tloops.c", directory: "/work/main", checksumkind: CSK_MD5, checksum: "c3546f81")
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 1, !"wchar_size", i32 4}
!5 = !{i32 8, !"PIC Level", i32 2}
!6 = !{i32 7, !"PIE Level", i32 2}
!7 = !{i32 7, !"uwtable", i32 2}
!8 = !{i32 7, !"debug-info-assignment-tracking", i1 true}
!10 = distinct !DISubprogram(name: "sum_to", scope: !1, file: !1, line:  2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !14)
!11 = !DISubroutineType(types: !12)
!12 = !{!13, !13}
!13 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!14 = !{!15, !16, !17}
!15 = !DILocalVariable(name: "n", arg: 1, scope: !10, file: !1, line: 2, type: !13)
!16 = !DILocalVariable(name: "total", scope: !10, file: !1, line: 3, type: !13)
!17 = !DILocalVariable(name: "i", scope: !18, file: !1, line: 4, type: !13)
!18 = distinct !DILexicalBlock(scope: !10, file: !1, line: 4, column: 5)
!19 = !DILocation(line: 0, scope: !10)
!21 = !DILocation(line: 4, column: 23, scope: !22)
!22 = distinct !DILexicalBlock(scope: !18, file: !1, line: 4, column: 5)
!23 = !DILocation(line: 4, column: 5, scope: !18)
!24 = !DILocation(line: 6, column: 5, scope: !10)
!25 = distinct !DISubprogram(name: "matmul", scope: !1, file: !1, line: 9, type: !26, scopeLine: 9, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !32)
!26 = !DISubroutineType(types: !27)
!27 = !{}
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
!49 = !DILocation(line: 10, column: 23, scope: !41)
!50 = !DILocation(line: 10, column: 5, scope: !38)
!52 = !DILocation(line: 11, column: 9, scope: !40)
!53 = !DILocation(line: 17, column: 1, scope: !25)
!56 = !DILocation(line: 13, column: 13, scope: !46)
!57 = !DILocation(line: 10, column: 29, scope: !41)
!58 = distinct !{!58, !50, !59, !60}
!59 = !DILocation(line: 16, column: 9, scope: !38)
!60 = !{!"llvm.loop.mustprogress"}
!61 = !DILocation(line: 14, column: 24, scope: !62)
!62 = distinct !DILexicalBlock(scope: !46, file: !1, line: 13, column: 13)
!63 = !{!64, !64, i64 0}
!64 = !{!"float", !64, i64 0}
!65 = !{!"omnipotent char", !66, i64 0}
!66 = !{!"Simple C/C++ TBAA"}
!67 = !DILocation(line: 14, column: 43, scope: !62)
!68 = !DILocation(line: 14, column: 39, scope: !62)
!69 = !DILocation(line: 14, column: 21, scope: !62)
!70 = !DILocation(line: 13, column: 37, scope: !62)
!71 = distinct !{!71, !72}
!72 = !{!"llvm.loop.unroll.disable"}
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