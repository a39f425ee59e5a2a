
@.str = private unnamed_addr constant [3 x i8] c"OK\00", align 1, !dbg !0
@.str.1 = private unnamed_addr constant [18 x i8] c"Moved Permanently\00", align 1, !dbg !7
@.str.2 = private unnamed_addr constant [10 x i8] c"Not Found\00", align 1, !dbg !12
@.str.3 = private unnamed_addr constant [22 x i8] c"Internal Server Error\00", align 1, !dbg !17
@.str.4 = private unnamed_addr constant [8 x i8] c"Unknown\00", align 1, !dbg !22

; Function Attrs: mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable
define dso_local range(i32 28, 32) i32 @days_in_month(i32 noundef %0, i32 noundef %1) local_unnamed_addr #0 !dbg !53 {
    #dbg_value(i32 %0, !57, !DIExpression(), !59)
    #dbg_value(i32 %1, !58, !DIExpression(), !59)
  switch i32 %0, label %6 [
    i32 9, label %7
    i32 11, label %7
  ], !dbg !60

3:                                                ; preds = %2
  %4 = icmp eq i32 %1, 0, !dbg !61
  %5 = select i1 %4, i32 28, i32 29, !dbg !61
  br label %7, !dbg !63

6:                                                ; preds = %2
  br label %7, !dbg !64

7:                                                ; preds = %2, %2, %2, %2, %6, %3
  %8 = phi i32 [ 31, %6 ], [ %5, %3 ], [ 30, %2 ], [ 30, %2 ], [ 30, %2 ], [ 30, %2 ], !dbg !65
  ret i32 %8, !dbg !66
}

; Function Attrs: mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable
define dso_local noundef nonnull ptr @http_reason(i32 noundef %0) local_unnamed_addr #0 !dbg !67 {
    #dbg_value(i32 %0, !71, !DIExpression(), !72)
  switch i32 %0, label %5 [
    i32 500, label %4
  ], !dbg !73

2:                                                ; preds = %1
  br label %6, !dbg !74

3:                                                ; preds = %1
  br label %6, !dbg !76

4:                                                ; preds = %1
  br label %6, !dbg !77

5:                                                ; preds = %1
  br label %6, !dbg !78

6:                                                ; preds = %1, %5, %4, %3, %2
  %7 = phi ptr [ @.str.4, %5 ], [ @.str.3, %4 ], [ @.str.2, %3 ], [ @.str.1, %2 ], [ @.str, %1 ], !dbg !79
  ret ptr %7, !dbg !80
}

; Function Attrs: nofree norecurse nosync nounwind memory(read, inaccessiblemem: none) uwtable
define dso_local i32 @count_words(ptr nocapture noundef readonly %0) local_unnamed_addr #1 !dbg !30 {
    #dbg_value(ptr %0, !37, !DIExpression(), !81)
    #dbg_value(i32 0, !38, !DIExpression(), !81)
    #dbg_value(i32 0, !39, !DIExpression(), !81)
  br label %2, !dbg !82

2:                                                ; preds = %11, %1
  %3 = phi ptr [ %0, %1 ], [ %14, %11 ]
  %4 = phi i32 [ 0, %1 ], [ %12, %11 ], !dbg !81
  %5 = phi i32 [ 0, %1 ], [ %13, %11 ], !dbg !81
    #dbg_value(i32 %5, !39, !DIExpression(), !81)
    #dbg_value(i32 %4, !38, !DIExpression(), !81)
    #dbg_value(ptr %3, !37, !DIExpression(), !81)
  %6 = load i8, ptr %3, align 1, !dbg !83, !tbaa !86
  switch i8 %6, label %7 [
    i8 10, label %11
  ], !dbg !89

7:                                                ; preds = %2
  %8 = icmp eq i32 %4, 0, !dbg !90
  %9 = zext i1 %8 to i32, !dbg !94
  %10 = add nsw i32 %5, %9, !dbg !94
    #dbg_value(i32 %10, !39, !DIExpression(), !81)
    #dbg_value(i32 1, !38, !DIExpression(), !81)
  br label %11, !dbg !95

11:                                               ; preds = %2, %2, %2, %7
  %12 = phi i32 [ 1, %7 ], [ 0, %2 ], [ 0, %2 ], [ 0, %2 ], !dbg !96
  %13 = phi i32 [ %10, %7 ], [ %5, %2 ], [ %5, %2 ], [ %5, %2 ], !dbg !81
    #dbg_value(i32 %13, !39, !DIExpression(), !81)
    #dbg_value(i32 %12, !38, !DIExpression(), !81)
  %14 = getelementptr inbounds i8, ptr %3, i64 1, !dbg !97
    #dbg_value(ptr %14, !37, !DIExpression(), !81)
  br label %2, !dbg !98, !llvm.loop !99

15:                                               ; preds = %2
  ret i32 %5, !dbg !102
}

attributes #0 = { mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { nofree norecurse nosync nounwind memory(read, inaccessiblemem: none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }

!llvm.dbg.cu = !{!27}
!llvm.module.flags = !{!45, !46, !47, !48, !49, !50, !51}
!llvm.ident = !{!52}

!0 = !DIGlobalVariableExpression(var: !1, expr: !DIExpression())
!1 = distinct !DIGlobalVariable(scope: null, file: !2, line: 15, type: !3, isLocal: true, isDefinition: true)
!2 = !DIFile(filename: "tests/data/c/switch.c", directory: "/work/main", checksumkind: CSK_MD5, checksum: "10d021776c24f812843ed67b32f90fee")
!3 = !DICompositeType(tag: DW_TAG_array_type, baseType: !4, size: 24, elements: !5)
!4 = !DIBasicType(name: "char", size: 8, encoding: DW_ATE_signed_char)
!5 = !{!6}
!6 = !DISubrange(count: 3)
!7 = !DIGlobalVariableExpression(var: !8, expr: !DIExpression())
!8 = distinct !DIGlobalVariable(scope: null, file: !2, line: 16, type: !9, isLocal: true, isDefinition: true)
!9 = !DICompositeType(tag: DW_TAG_array_type, baseType: !4, size: 144, elements: !10)
!10 = !{!11}
!11 = !DISubrange(count: 18)
!12 = !DIGlobalVariableExpression(var: !13, expr: !DIExpression())
!13 = distinct !DIGlobalVariable(scope: null, file: !2, line: 17, type: !14, isLocal: true, isDefinition: true)
!14 = !DICompositeType(tag: DW_TAG_array_type, baseType: !4, size: 80, elements: !15)
!15 = !{!16}
!16 = !DISubrange(count: 10)
!17 = !DIGlobalVariableExpression(var: !18, expr: !DIExpression())
!18 = distinct !DIGlobalVariable(scope: null, file: !2, line: 18, type: !19, isLocal: true, isDefinition: true)
!19 = !DICompositeType(tag: DW_TAG_array_type, baseType: !4, size: 176, elements: !20)
!20 = !{!21}
!21 = !DISubrange(count: 22)
!22 = !DIGlobalVariableExpression(var: !23, expr: !DIExpression())
!23 = distinct !DIGlobalVariable(scope: null, file: !2, line: 19, type: !24, isLocal: true, isDefinition: true)
!24 = !DICompositeType(tag: DW_TAG_array_type, baseType: !4, size: 64, elements: !25)
!25 = !{!26}
!26 = !DISubrange(count: 8)
!27 = distinct !DICompileUnit(language: DW_LANG_C11, file: !2, producer: "Debian clang version 19.1.7 (3~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, enums: !28, globals: !44, splitDebugInlining: false, nameTableKind: None)
!28 = !{!29}
!29 = !DICompositeType(tag: DW_TAG_enumeration_type, scope: !30, file: !2, line: 24, baseType: !40, size: 32, elements: !41)
!30 = distinct !DISubprogram(name: "count_words", scope: !2, file: !2, line: 23, type: !31, scopeLine: 23, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !27, retainedNodes: !36)
!31 = !DISubroutineType(types: !32)
!32 = !{!33, !34}
!33 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!34 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !35, size: 64)
!35 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !4)
!36 = !{!37, !38, !39}
!37 = !DILocalVariable(name: "text", arg: 1, scope: !30, file: !2, line: 23, type: !34)
!38 = !DILocalVariable(name: "state", scope: !30, file: !2, line: 24, type: !29)
!39 = !DILocalVariable(name: "words", scope: !30, file: !2, line: 25, type: !33)
!40 = !DIBasicType(name: "unsigned int", size: 32, encoding: DW_ATE_unsigned)
!41 = !{!42, !43}
!42 = !DIEnumerator(name: "OUTSIDE", value: 0)
!43 = !DIEnumerator(name: "INSIDE", value: 1)
!44 = !{!0, !7, !12, !17, !22}
!45 = !{i32 7, !"Dwarf Version", i32 5}
!46 = !{i32 2, !"Debug Info Version", i32 3}
!47 = !{i32 1, !"wchar_size", i32 4}
!48 = !{i32 8, !"PIC Level", i32 2}
!49 = !{i32 7, !"PIE Level", i32 2}
!50 = !{i32 7, !"uwtable", i32 2}
!51 = !{i32 7, !"debug-info-assignment-tracking", i1 true}
!52 = !{!"Debian clang version 19.1.7 (3~deb12u1)"}
!53 = distinct !DISubprogram(name: "days_in_month", scope: !2, file: !2, line: 2, type: !54, scopeLine: 2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !27, retainedNodes: !56)
!54 = !DISubroutineType(types: !55)
!55 = !{!33, !33, !33}
!56 = !{!57, !58}
!57 = !DILocalVariable(name: "month", arg: 1, scope: !53, file: !2, line: 2, type: !33)
!58 = !DILocalVariable(name: "leap", arg: 2, scope: !53, file: !2, line: 2, type: !33)
!59 = !DILocation(line: 0, scope: !53)
!60 = !DILocation(line: 3, column: 5, scope: !53)
!61 = !DILocation(line: 5, column: 16, scope: !62)
!62 = distinct !DILexicalBlock(scope: !53, file: !2, line: 3, column: 20)
!63 = !DILocation(line: 5, column: 9, scope: !62)
!64 = !DILocation(line: 9, column: 9, scope: !62)
!65 = !DILocation(line: 0, scope: !62)
!66 = !DILocation(line: 11, column: 1, scope: !53)
!67 = distinct !DISubprogram(name: "http_reason", scope: !2, file: !2, line: 13, type: !68, scopeLine: 13, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !27, retainedNodes: !70)
!68 = !DISubroutineType(types: !69)
!69 = !{!34, !33}
!70 = !{!71}
!71 = !DILocalVariable(name: "status", arg: 1, scope: !67, file: !2, line: 13, type: !33)
!72 = !DILocation(line: 0, scope: !67)
!73 = !DILocation(line: 14, column: 5, scope: !67)
!74 = !DILocation(line: 16, column: 15, scope: !75)
!75 = distinct !DILexicalBlock(scope: !67, file: !2, line: 14, column: 21)
!76 = !DILocation(line: 17, column: 15, scope: !75)
!77 = !DILocation(line: 18, column: 15, scope: !75)
!78 = !DILocation(line: 19, column: 14, scope: !75)
!79 = !DILocation(line: 0, scope: !75)
!80 = !DILocation(line: 21, column: 1, scope: !67)
!81 = !DILocation(line: 0, scope: !30)
!82 = !DILocation(line: 26, column: 5, scope: !30)
!83 = !DILocation(line: 26, column: 12, scope: !84)
!84 = distinct !DILexicalBlock(scope: !85, file: !2, line: 26, column: 5)
!85 = distinct !DILexicalBlock(scope: !30, file: !2, line: 26, column: 5)
!86 = !{!87, !87, i64 0}
!87 = !{!"omnipotent char", !88, i64 0}
!88 = !{!"Simple C/C++ TBAA"}
!89 = !DILocation(line: 26, column: 5, scope: !85)
!90 = !DILocation(line: 32, column: 23, scope: !91)
!91 = distinct !DILexicalBlock(scope: !92, file: !2, line: 32, column: 17)
!92 = distinct !DILexicalBlock(scope: !91, file: !2, line: 27, column: 24)
!93 = distinct !DILexicalBlock(scope: !84, file: !2, line: 26, column: 27)
!94 = !DILocation(line: 32, column: 17, scope: !92)
!95 = !DILocation(line: 35, column: 9, scope: !92)
!96 = !DILocation(line: 0, scope: !92)
!97 = !DILocation(line: 26, column: 23, scope: !84)
!98 = !DILocation(line: 26, column: 5, scope: !84)
!99 = distinct !{!99, !89, !100, !101}
!100 = !DILocation(line: 36, column: 5, scope: !85)
!101 = !{!"llvm.loop.mustprogress"}
!102 = !DILocation(line: 37, column: 5, scope: !30)
