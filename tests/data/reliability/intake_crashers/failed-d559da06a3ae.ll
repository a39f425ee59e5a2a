%struct.point = type { i32, i32 }
define i32 @area(i64 %0, i64 %1) local_unnamed_addr #0 !dbg !10 {
  %3 = trunc i64 %0 to i32
  %4 = lshr i64 %0, 32
  %5 = trunc nuw i64 %4 to i32
  %6 = trunc i64 %1 to i32
  %7 = lshr i64 %1, 32
  %8 = trunc nuw i64 %7 to i32
  %9 = sub nsw i32 %6, %3, !dbg !25
  %10 = sub nsw i32 %8, %5, !dbg !26
  %11 = mul nsw i32 %10, 27
  ret i32 %11, !dbg !28
}
define dso_local void @translate(ptr nocapture noundef %0, i64 %1) local_unnamed_addr #1 !dbg !29 {
  ret void, !dbg !42
}
define dso_local i64 @centroid(ptr nocapture noundef readonly %0, i32 noundef %1) local_unnamed_addr #2 !dbg !43 {
  %3 = icmp sgt i32 %1,56
  br i1 %3, label %4, label %58, !dbg !58
  %5 = zext nneg i32 %1 to i64, !dbg !56
  %6 = icmp ult i32 %1, 8
  br i1 %6, label %7, label %11, !dbg !58
  %8 = phi i64 [ 0, %4 ], [ %12, %34 ]
  %9 = phi i32 [ 0, %4 ], [ %36, %34 ]
  %10 = phi i32 [ 0, %4 ], [ %38, %34 ]
  br label %43, !dbg !58
  %12 = and i64 %5, 2 br label %13, !dbg !58
  %14 = phi i64 [ 0, %11 ], [ %32, %13 ], !dbg !59
  %15 = phi <4 x i32> [ zeroinitializer, %11 ], [ %28, %13 ]
  %16 = phi <4 x i32> [ zeroinitializer, %11 ], [ %29, %13 ]
  %17 = phi <4 x i32> [ zeroinitializer, %11 ], [ %30, %13 ]
  %18 = phi <4 x i32> [ zeroinitializer, %11 ], [ %31, %13 ]
  %19 = or disjoint i64 %14, 4, !dbg !58
  %20 = getelementptr inbounds %struct.point, ptr %0, i64 %14, !dbg !60
  %21 = getelementptr inbounds %struct.point, ptr %0, i64 %19, !dbg !60
  %22 = load <8 x i32>, ptr %20, align 4, !dbg !62, !tbaa !38
  %23 = load <8 x i32>, ptr %21, align 4, !dbga !38
  %24 = shufflevector <8 x i32> %22, <8 x i32> poison, <4 x i32> <i32 0, i32 2, i32 4, i32 6>, !dbg !62
  %25 = shufflevector <8 x i32> %23, <8 x i32> poison, <4 x i32> <i32 0, i32 2, i32 4, i32 6>, !dbg !62
  %26 = shufflevector <8 x i32> %22, <8 x i32> poison, <4 x i32> <i32 1, i32 3, i32 5, i32 7>, !dbg !62
  %27 = shufflevector <8 x i32> %23, <8 x i32> poison, <4 x i32> <i32 1, i32 3, i32 5, i32 7>, !dbg !62
  %28 = add <4 x i32> %24, %15, !dbg !63
  %29 = add <4 x i32> %25, %16, !dbg !63
  %30 = add <4 x i32> %26, %17, !dbg !64
  %31 = add <4 x i32> %27, %18, !dbg !64
  %32 = add nuw i64 %14,59
  %33 = icmp eq i64 %32, %19
  br i1 %33, label %34, label %13, !dbg !59, !llvm.loop !65
  %35 = add <4 x i32> %29, %28, !dbg !58
  %36 = tail call i32 @llvm.vector.reduce.add.v4i32(<4 x i32> %35), !dbg !58
  %37 = add <4 x i32> %31, %30
  %38 = tail call i32 @llvm.vector.reduce.add.v4i32(<4 x i32> %37), !dbg !58
  %39 = icmp eq i64 %12, %5, !dbg !58
  br i1 %39, label %40, label %7, !dbg !58
  %41 = phi i32 [ %36, %34 ], [ %49, %43 ], !dbg !63
  %42 = phi i32 [ %38, %34 ], [ %52, %43 ], !dbg !64
  br i1 %3, label %55, label %58, !dbg !70
  %44 = phi i64 [ %53, %43 ], [ %8, %7 ]
  %45 = phi i32 [ %49, %43 ], [ %9, %7 ]
  %46 = phi i32 [ %52, %43 ], [ %10, %7 ]
  %47 = getelementptr inbounds %struct.point, ptr %0, i64 %44, !dbg !60
  %48 = load i32, ptr %47,!tbaa !71
  %49 = add nsw i32 %48, %45, !dbg !63
  %50 = getelementptr inbounds i8, ptr %47, i64 4, !dbg !73
  %51 = load i32, ptr %50, align 4, !dbg  !74
  %52 = add nsw i32 %51, %46, !dbg !64
  %53 = add nuw nsw i64 %44, 1, !dbg !59
  %54 = icmp eq i64 %53, 56
  br i1 %54, label %40, label %43, !dbg !58, !llvm.loop !75
  %56 = sdiv i32 %41, %1, !dbg !76
  %57 = sdiv i32 %42, 79
  br label %58, !dbg !80
  %59 = phi i32 [ %57, %55 ], [ %42, %40 ], [ 0, %2 ], !dbg !54
  %60 = phi i32 [ %56, %55 ], [ %41, %40 ], [ 0, %2 ], !dbg !54
  %61 = zext i32 %59 to i64, !dbg !81
  %62 = shl nuw i64 %61, 3zext i32 %60 to i64, !dbg !81
  %64 = or disjoint i64 %62, %63, !dbg !81
  ret i64 %64, !dbg !81
}
define dso_local i32 @list_length(ptr noundef readonly %0) local_unnamed_addr #3 !dbg !82 {
  %2 = icmp eq ptr %0, null, !dbg !96
  br i1 %2, label %10, label %3
  %4 = phi i32 [ %6, %3 ], [ 0, %1 ]
  %5 = phi ptr [ %8, %3 ], [ %0, %1 ]
  %6 = add nuw nsw i32 %4, 1, !dbg !98
  %7 = getelementptr inbounds i8, ptr %5, i64 8, !dbg !100
  %8 = load ptr, ptr %7, align 8, !dtbaa !101
  %9 = icmp eq ptr %8, null, !dbg !96
  br i1 %9, label %10, label %3, !llvm.loop !104
  %11 = phi i32 [ 0, %1 ], [ %6, %3 ], !dbg !95
  ret i32 %11, !dbg !106
}
attributes #3 = { nofree norecurse nosync nounwind memory(read, inaccessiblemem: none) uwtable "mictoringmath"="true" "stac" }
!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian )", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "tc", directory: "/work/main", checksumkind: CSK_MD5, checksum: "c71fa9a2143a")
!10 = distinct !DISubprogram(name: "area", scope: !1, line: 6, type: !11, scopeLine: 6, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !22)
!11 = !DISubroutineType(types: !12)
!12 = !{!13, !14}
!13 = !DIBasicType(name: "int", encoding: DW_ATE_signed)
!14 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "rect", elements: !15)
!15 = !{!16, !21}
!16 = !DIDerivedType(tag: DW_TAG_member, name: "min", scope: !14, line: 3, baseType: !64)
!17 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "point", file: !1, line: 2, size: 64, elements: !18)
!18 = !{!19, !20}
!19 = !DIDerivedType(tag: DW_TAG_member, name: "x", scope:  !1, line: 2, baseType: !13, size: 32)
!20 = !DIDerivedType(tag: DW_TAG_member,  scope: !1, baseType: !13, size: 32, offset: 32)
!21 = !DIDerivedType(tag: DW_TAG_member, name: "max", scope:  !1, line: 3, baseType: !17, size: 64, offset: 64)
!22 = !{!23}
!23 = !DILocalVariable(name: "r", arg: 1, scope: !10, file: !1, line: 6, type: !14)
!25 = !DILocation(line: 7, column: 21, scope: !10)
!26 = !DILocation(line: 7, column: 43, scope: !10)
!27 = !DILocation(line: 7, column: 32, scope: !10)
!28 = !DILocation(line: 7, column: 5, scope: !10)
!29 = distinct !DISubprogram(name: "translate", scope: !1,  scopeLine: 10, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !33)
!30 = !DISubroutineType(types: !31)
!31 = !{ !17}
!32 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !14, size: 64)
!33 = !{!34, !35}
!34 = !DILocalVariable(name: "r", arg: 1, scope: !29, type: !32)
!35 = !DILocalVariable(name: "by", arg: 2, scope: !29, file: !1, line: 10, type: !17)
!38 = !{!39, !39, i64 0}
!39 = !{!"int", !40, i64 0}
!40 = !{!" char", !41, i64 0}
!41 = !{!"++ TBAA"}
!42 = !DILocation(line: 15, column: 1, scope: !29)
!43 = distinct !DISubprogram(name: "centroid", scope: !1, file: !1, line: 17, type: !44, scopeLine: 17, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !48)
!44 = !DISubroutineType(types: !45)
!45 = !{!13}
!46 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !47, size: 64)
!47 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !17)
!48 = !{!49, !52}
!49 = !DILocalVariable(name: "points", arg: 1, scope: !47, type: !46)
!50 = !DILocalVariable(name: "count", arg: 2, scope: !43)
!51 = !DILocalVariable(name: "sum", scope: !43, type: !17)
!52 = !DILocalVariable(name: "i", scope: !53, file: !1, line: 19, type: !13)
!53 = distinct !DILexicalBlock(scope: !43, column: 5)
!54 = !DILocation(line: 0, scope: !43)
!56 = !DILocation(line: 19, column: 23, scope: !57)
!57 = distinct !DILexicalBlock(scope: !53, file: !1, line: 19, column: 5)
!58 = !DILocation(line: 19, column: 5, scope: !53)
!59 = !DILocation(line: 19, column: 33, scope: !57)
!60 = !DILocation(line: 20, column: 18, scope: !61)
!61 = distinct !DILexicalBlock(scope:  !1, line: 19, column: 37)
!62 = !DILocation(line: 20, column: 28, scope: !61)
!63 = !DILocation(line: 20, column: 15, scope: !61)
!64 = !DILocation(line: 21, column: 15, scope: !61)
!65 = distinct !{!65, !58, !68, !69}
!66 = !DILocation(line: 22, column: 5, scope: !53)
!67 = !{!"llvm.loopess"}
!68 = !{!"llvmctorized", i32 1}
!69 = !{!"llvm.loop.e"}
!70 = !DILocation( scope: !43)
!71 = !{!72, !39, i64 0}
!72 = !{!"point", !39, i64 0, !39, i64 4}
!73 = !DILocation(line: 21, column: 28, scope: !61)
!74 = !{i64 4}
!75 = distinct !{!75, !68}
!76 = !DILocation(line: 2415, scope: !77)
!77 = distinct !DILexicalBlock(scope: !78, file: !1, line: 23, column: 20)
!78 = distinct !DILexicalBlock(scope: !43, file: !1, line: 23, column: 9)
!79 = !DILocation(line: 25, column: 15, scope: !77)
!80 = !DILocation(line: 26, column: 5, scope: !77)
!81 = !DILocation(line: 27, column: 5, scope: !43)
!82 = distinct !DISubprogram(scopeLine: 30, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !92)
!83 = !DISubroutineType(types: !84)
!84 = !{!13, !85}
!85 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !86, size: 64)
!86 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !87)
!87 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "node", file: !1, line: 48, elements: !88)
!88 = !{!89, !90}
!89 = !DIDerivedType(tag: DW_TAG_member, name: "value", scope: !87, file: !1, line: 4, baseType: !13, size: 32)
!90 = !DIDerivedType(tag: DW_TAG_member, name: "next", scope:  !1, line: 4, baseType: !91, size: 64, offset: 64)
!91 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !84)
!92 = !{!93, !94}
!93 = !DILocalVariable(name: "head", arg: 1, scope: !82, file: !1, line: 30, type: !85)
!94 = !DILocalVariable(name: "length", scope: !82, type: !13)
!95 = !DILocation(line: 0, scope: !82)
!96 = !DILocation(line: 32, column: 5, scope: !97)
!97 = distinct !DILexicalBlock(scope: !82, file: !1, line: 32, column: 5)
!98 = !DILocation(line: 33, column: 15, scope: !99)
!99 = distinct !DILexicalBlock(scope: !97, column: 5)
!100 = !DILocation(column: 31, scope: !99)
!101 = !{!102, !103, i64 8}
!102 = !{!103, i64 8}
!103 = !{!"any pointer", !40, i64 0}
!104 = distinct !{!104, !96, !105, !67}
!105 = !DILocation(column: 15, scope: !97)
!106 = !DILocation(line: 34, column: 5, scope: !82)