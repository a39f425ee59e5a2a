%struct.__va_list_tag = type { i32, i32, ptr, ptr }
@operations = dso_local local_unnamed_addr constant [2 x ptr] [ptr @twice, ptr @square], align 16, !dbg !0
@primes = internal unnamed_addr constant [8 x i32] [i32 2, i32 3, i32 5, i32 7, i32 11, i32 13, i32 17, i32 19], align 16, !dbg !14
define internal i32 @twice(i32 noundef %0) #0 !dbg !37 {
  %2 = shl nsw i32 %0, 1, !dbg !41
  ret i32 %2, !dbg !42
}
define internal i32 @square(i32 noundef %0) #0 !dbg !43 {
  %2 = mul nsw i32 %0, %0, !dbg !47
  ret i32 %2, !dbg !48
}
define dso_local i32 @apply(i32 noundef %0, i32 noundef %1) local_unnamed_addr #1 !dbg !49 {
  %3 = and i32 %0, 1, !dbg !56
  %4 = zext nneg i32 %3 to i64, !dbg !57
  %5 = getelementptr inbounds [2 x ptr], ptr @operations, i64 0, i64 %4, !dbg !57
  %6 = load ptr, ptr %5, align 8, !dbg !57, !tbaa !58
  %7 = tail call i32 %6(i32 noundef %1) #8, !dbg !57
  ret i32 %7, !dbg !62
}
define dso_local i32 @nth_prime(i32 noundef %0) local_unnamed_addr #0 !dbg !63 {
  %2 = icmp ult i32 %0, 8, !dbg !67
  br i1 %2, label %3, label %7, !dbg !67
  %4 = zext nneg i32 %0 to i64, !dbg !68
  %5 = getelementptr inbounds [8 x i32], ptr @primes, i64 0, i64 %4, !dbg !68
  %6 = load i32, ptr %5, align 4, !dbg !68, !tbaa !69
  br label %7, !dbg !71
  %8 = phi i32 [ %6, %3 ], [ -1, %1 ], !dbg !71
  ret i32 %8, !dbg !72
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
  %13 = phi i64mul nuw nsw i64 %13, %7
  %15 = getelementptr inbounds float, ptr %1, i64 %14
  br label %18, !dbg !52
17:               ;
  ret void, !dbg !53
  %19 = phi i64 [ 0, %12 ] %20 = getelementptr inbounds float, ptr %2, i64 %19, !dbg !56
  br i1 %9, label %24, label %46, !dbg !56
  %22 = add nuw nsw i64 %13, 1, !dbg !57
  %23 = icmp eq i64 %22, %7, !dbg !49
  br i1 %23, label %17, label %12, !dbg !58
  %26 = phi i64 phi float [ 0.000000e+00, %18 ], [ %76, %46 ]
  br i1 %11, label %41, label %28, !dbg !56
  %29 = phi i64 [26, %24 ]
  %30 = phi float [ %37, %28 ], [ %27, %24 ]
  %31 = phi i64 [ %39, %28 ], [ 0, %24 ]
  %32 = getelementptr inbounds float, ptr %15, i64 %29, !dbg !61
  %33 = load float, ptr %32, align 4, !dbg !61, !tbaa !63
  %34 = mul nuw nsw i64 %29, %7, !dbg !67
  %35 = getelementptr inbounds float, ptr %20, i64 %34, !dbg !68
  %36 = load float, ptr %35, align 4, !dbg !68, !tbaa !63
  %37 = tail call float @llvm.fmuladd.f32(float %33, float %36, float %30), !dbg !69
  %38 = add nuw nsw i64 %29, 1, !dbg !70
  %39 = add i64 %31, 1, !dbg !56
  %40 = icmp eq i64 %39, %8, !dbg !56
  br i1 %40, label %41, label %28, !dbg !56
  %44 = add nuw nsw i64 %19, 1, !dbg !75
  %45 = icmp eq i64 %44, %7, !dbg !76
  br i1 %45, label %21, label %18, !dbg !52, !llvm.loop !77
  %47 = phi i64 [ %77, %46 ], [ 0, %18 ]
  %48 = phi float [ %76, %46 ], [ 0.000000e+00, %18 ]
  %49 = phi i64 [ %78, %46 ], [ 0, %18 ]
  %50 = getelementptr inbounds float, ptr %15, i64 %47, !dbg !61
  %51 = load float, ptr %50, align 4, !dbg !61, !tbaa !63
  %52 = mul nuw nsw i64 %47, %7, !dbg !67
  %53 = getelementptr inbounds float, ptr %20, i64 %52, !dbg !68
  %54 = load float, ptr %53, align 4, !dbg !68, !tbaa !63
  %55 = tail call float @llvm.fmuladd.f32(float %51, float %54, float %48), !dbg !69
  %56 = or disjoint i64 %47, 1, !dbg !70
  %57 = getelementptr inbounds float, ptr %15, i64 %56, !dbg !61
  %58 = load float, ptr %57, align 4, !dbg !61, !tbaa !63
  %59 = mul nuw nsw i64 %56, %7, !dbg !67
  %60 = getelementptr inbounds float, ptr %20, i64 %59, !dbg !68
  %61 = load float, ptr %60, align 4, !dbg !68, !tbaa !63
  %62 = tail call float @llvm.fmuladd.f32(float %58, float %61, float %55), !dbg !69
  %63 = or disjoint i64 %47, 2, !dbg !70
  %64 = getelementptr inbounds float, ptr %15, i64 %63, !dbg !61
  %65 = load float, ptr %64, align 4, !dbg !61, !tbaa !63
  %66 = mul nuw nsw i64 %63, %7, !dbg !67
  %67 = getelementptr inbounds float, ptr %20, i64 %66, !dbg !68
  %68 = load float, ptr %67, align 4, !dbg !68, !tbaa !63
  %69 = tail call float @llvm.fmuladd.f32(float %65, float %68, float %62), !dbg !69
  %70 = or disjoint i64 %47, 3, !dbg !70
  %71 = getelementptr inbounds float, ptr %15, i64 %70, !dbg !61
  %72 = load float, ptr %71, align 4, !dbg !61, !tbaa !63
  %73 = mul nuw nsw i64 %70, %7, !dbg !67
  %74 = getelementptr inbounds float, ptr %20, i64 %73, !dbg !68
  %75 = load float, ptr %74, align 4, !dbg !68, !tbaa !63
  %76 = tail call float @llvm.fmuladd.f32(float %72, float %75, float %69), !dbg !69
  %77 = add nuw nsw i64 %47, 4, !dbg !70
  %78 = add i64 %49, 4, !dbg !56
  %79 = icmp eq i64 %78, %10, !dbg !56
  br i1 %79, label %24, label %46, !dbg !56, !llvm.loop !79
}
define dso_local i32 @sum_varargs(i32 noundef %0, ...) local_unnamed_addr #3 !dbg !79 {
  %2 = alloca [1 x %struct.__va_list_tag], align 16, !DIAssignID !102
  %3 = icmp sgt i32 %0, 0, !dbg !107
  br i1 %3, label %4, label %32, !dbg !109
  %5 = load i32, ptr %2, align 16
  %6 = getelementptr inbounds i8, ptr %2, i64 8
  %7 = getelementptr inbounds i8, ptr %2, i64 16
  %8 = load ptr, ptr %7, align 16
  %9 = load ptr, ptr %6, align 8
  %11 = icmp eq i32 %0, 1, !dbg !109
  br i1 %11, label %14, label %12, !dbg !109
  %13 = and i32 %0, 21479
  br label %34, !dbg !109
  %15 = phi i32 [ poison, %4 ], [ %64, %59 ]
  %16 = phi ptr [ %9, %4 ], [ %60, %59 ]
  %17 = phi i32 [ 0, %4 ], [ %64, %59 ]
  %18 = phi i32 [ %5, %4 ], [ %61, %59 ]
  %21 = icmp ult i32 %18, 41, !dbg !110
  br i1 %21, label %24, label %22, !dbg !110
  br label %28, !dbg !110
24:           
  %25 = zext nneg i32 %18 to i64, !dbg !110
  %26 = getelementptr i8, ptr %8, i64 %25, !dbg !110
  br label %28, !dbg !110
28:              ; preds = %24, %22
  %29 = phi ptr [ %26, %24 ], [ %16, %22 ], !dbg !110
  %30 = load i32, ptr %29, align 4, !dbg !110, !tbaa !69
  %31 = add nsw i32 %30, %17, !dbg !113
  br label %32, !dbg !114
  %33 = phi i32 [ 0, %1 ], [ %15, %14 ], [ %31, %28 ], !dbg !103
  ret i32 %33, !dbg !116
  %35 = phi ptr [ %9, %12 ], [ %60, %59 ]
  %36 = phi i32 [ 0, %12 ], [ %64, %59 ]
  %37 = phi i32 [ %5, %12 ], [ %61, %59 ]
  %38 = phi i32 icmp ult i32 %37, 41, !dbg !110
  br i1 %39, label %40, label %44, !dbg !110
  %41 = zext nneg i32 %37 to i64, !dbg !110
  %42 = getelementptr i8, ptr %8, i64 %41, !dbg !110
  %43 = add nuw nsw i32 %37, 8, !dbg !110
  br label %46, !dbg !110
  %45 = getelementptr i8, ptr %35, i64 8, !dbg !110
  br label %46, !dbg !110
  %47 = phi ptr [ %35, %40 ], [ %45, %44 ]
  %48 = phi i32 [ %43, %40 ], [ %37, %44 ]
  %49 = phi ptr [ %42, %40 ], [ %35, %44 ], !dbg !110
  %50 = load i32, ptr %49, align 4, !dbg !110, !tbaa !69
  %51 = add nsw i32 %50, %36, !dbg !113
  %52 = icmp ult i32 %48, 41, !dbg !110
  br i1 %52, label %55, label %53, !dbg !110
  %54 = getelementptr i8, ptr %47, i64 8, !dbg !110
  br label %59, !dbg !110
  %56 = zext nneg i32 %48 to i64, !dbg !110
  %57 = getelementptr i8, ptr %8, i64 %56, !dbg !110
  %58 = add nuw nsw i32 %48, 8, !dbg !110
  br label %59, !dbg !110
  %60 = phi ptr [ %47, %55 ], [ %54, %53 ]
  %61 = phi i32 [ %58, %55 ], [ %48, %53 ]
  %62 = phi ptr [ %57, %55 ], [ %47, %53 ], !dbg !110
  %63 = load i32, ptr %62, align 4, !dbg !110, !tbaa !69
  %64 = add nsw i32 %63, %51, !dbg !113
  %65 = add i32 %38, 2, !dbg !109
  %66 = icmp eq i32 %65, %13, !dbg !109
  br i1 %66, label %14, label %34, !dbg !109, !llvm.loop !117
}
!llvm.module.flags = !{!29, !30, !31, !32, !33, !34, !35}
!0 = !DIGlobalVariableExpression(var: !1, expr: !DIExpression())
!1 = distinct !DIGlobalVariable(name: "operations", scope: !2, file: !3, line: 13, type: !22, isLocal: false, isDefinition: true)
!2 = distinct !DICompileUnit(language: DW_LANG_C11, file: !3, producer: "Debian clang version 19.1.7 (3~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, globals: !4, splitDebugInlining: false, nameTableKind: None)
!3 = !DIFile(filename: "tests/data/c/globals.c", directory: "/work/main", checksumkind: CSK_MD5, checksum: "66c69dc86fda276562f02543d79cbf8b")
!4 = !{!0, !5, !11, !14, !20}
!5 = !DIGlobalVariableExpression(var: !6, expr: !DIExpression())
!6 = distinct !DIGlobalVariable(scope: null, file: !3, line: 39, type: !7, isLocal: true, isDefinition: true)
!7 = !DICompositeType(tag: DW_TAG_array_type, baseType: !8, size: 160, elements: !9)
!8 = !DIBasicType(name: "char", size: 8, encoding: DW_ATE_signed_char)
!9 = !{!10}
!10 = !DISubrange(count: 20)
!11 = !DIGlobalVariableExpression(var: !12, expr: !DIExpression())
!12 = distinct !DIGlobalVariable(name: "counter", scope: !2, file: !3, line: 7, type: !13, isLocal: false, isDefinition: true)
!13 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!14 = !DIGlobalVariableExpression(var: !15, expr: !DIExpression())
!15 = distinct !DIGlobalVariable(name: "primes", scope: !2, file: !3, line: 6, type: !16, isLocal: true, isDefinition: true)
!16 = !DICompositeType(tag: DW_TAG_array_type, baseType: !17, size: 256, elements: !18)
!17 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !13)
!18 = !{!19}
!19 = !DISubrange(count: 8)
!20 = !DIGlobalVariableExpression(var: !21, expr: !DIExpression())
!21 = distinct !DIGlobalVariable(name: "hidden_state", scope: !2, file: !3, line: 8, type: !13, isLocal: true, isDefinition: true)
!22 = !DICompositeType(tag: DW_TAG_array_type, baseType: !23, size: 128, elements: !27)
!23 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !24)
!24 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !25, size: 64)
!25 = !DISubroutineType(types: !26)
!26 = !{!13, !13}
!27 = !{!28}
!28 = !DISubrange(count: 2)
!29 = !{i32 7, !"Dwarf Version", i32 5}
!30 = !{i32 2, !"Debug Info Version", i32 3}
!31 = !{i32 1, !"wchar_size", i32 4}
!32 = !{i32 8, !"PIC Level", i32 2}
!33 = !{i32 7, !"PIE Level", i32 2}
!34 = !{i32 7, !"uwtable", i32 2}
!35 = !{i32 7, !"debug-info-assignment-tracking", i1 true}
!37 = distinct !DISubprogram(name: "twice", scope: !3, file: !3, line: 10, type: !25, scopeLine: 10, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !2, retainedNodes: !38)
!38 = !{!39}
!39 = !DILocalVariable(name: "x", arg: 1, scope: !37, file: !3, line: 10, type: !13)
!41 = !DILocation(line: 10, column: 36, scope: !37)
!42 = !DILocation(line: 10, column: 27, scope: !37)
!43 = distinct !DISubprogram(name: "square", scope: !3, file: !3, line: 11, type: !25, scopeLine: 11, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !2, retainedNodes: !44)
!44 = !{!45}
!45 = !DILocalVariable(name: "x", arg: 1, scope: !43, file: !3, line: 11, type: !13)
!47 = !DILocation(line: 11, column: 37, scope: !43)
!48 = !DILocation(line: 11, column: 28, scope: !43)
!49 = distinct !DISubprogram(name: "apply", scope: !3, file: !3, line: 15, type: !50, scopeLine: 15, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !2, retainedNodes: !52)
!50 = !DISubroutineType(types: !51)
!51 = !{!13, !13, !13}
!52 = !{!53, !54}
!53 = !DILocalVariable(name: "which", arg: 1, scope: !49, file: !3, line: 15, type: !13)
!54 = !DILocalVariable(name: "x", arg: 2, scope: !49, file: !3, line: 15, type: !13)
!56 = !DILocation(line: 16, column: 29, scope: !49)
!57 = !DILocation(line: 16, column: 12, scope: !49)
!58 = !{!59, !59, i64 0}
!59 = !{!"any pointer", !60, i64 0}
!60 = !{!"omnipotent char", !61, i64 0}
!61 = !{!"Simple C/C++ TBAA"}
!62 = !DILocation(line: 16, column: 5, scope: !49)
!63 = distinct !DISubprogram(name: "nth_prime", scope: !3, file: !3, line: 19, type: !25, scopeLine: 19, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !2, retainedNodes: !64)
!64 = !{!65}
!65 = !DILocalVariable(name: "n", arg: 1, scope: !63, file: !3, line: 19, type: !13)
!67 = !DILocation(line: 20, column: 19, scope: !63)
!68 = !DILocation(line: 20, column: 30, scope: !63)
!69 = !{!70, !70, i64 0}
!70 = !{!"int", !60, i64 0}
!71 = !DILocation(line: 20, column: 12, scope: !63)
!72 = !DILocation(line: 20, column: 5, scope: !63)
!73 = distinct !DISubprogram(name: "bump", scope: !3, file: !3, line: 23, type: !74, scopeLine: 23, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !2)
!74 = !DISubroutineType(types: !75)
!75 = !{null}
!76 = !DILocation(line: 24, column: 12, scope: !73)
!77 = !DILocation(line: 25, column: 18, scope: !73)
!79 = distinct !DISubprogram(name: "sum_varargs", scope: !3, file: !3, line: 28, type: !80, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !2, retainedNodes: !82)
!80 = !DISubroutineType(types: !81)
!81 = !{!13, !13, null}
!82 = !{!83, !84, !99, !100}
!83 = !DILocalVariable(name: "count", arg: 1, scope: !79, file: !3, line: 28, type: !13)
!84 = !DILocalVariable(name: "args", scope: !79, file: !3, line: 29, type: !85)
!85 = !DIDerivedType(tag: DW_TAG_typedef, name: "va_list", file: !86, line: 12, baseType: !87)
!86 = !DIFile(filename: "/usr/__stdarg_va_list.h", directory: "f7d")
!87 = !DIDerivedType(tag: DW_TAG_typedef, name: "__builtin_va_list", file: !3, baseType: !88)
!88 = !DICompositeType(tag: DW_TAG_array_type, baseType: !89, size: 192, elements: !97)
!89 = distinct !DICompositeType(tag: DW_TAG_structure_type, name: "__va_list_tag", size: 192, elements: !90)
!90 = !{!91, !93, !94, !96}
!91 = !DIDerivedType(tag: DW_TAG_member, name: "gp_offset", scope: !89, file: !3, line: 29, baseType: !92, size: 32)
!92 = !DIBasicType(name: "unsigned int", size: 32, encoding: DW_ATE_unsigned)
!93 = !DIDerivedType(tag: DW_TAG_member, name: "fp_offset", scope: !89, file: !3, line: 29, baseType: !92, size: 32, offset: 32)
!94 = !DIDerivedType(tag: DW_TAG_member, name: "overflow_arg_area", scope: !89, file: !3, line: 29, baseType: !95, size: 64, offset: 64)
!95 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: null, size: 64)
!96 = !DIDerivedType(tag: DW_TAG_member, name: "reg_save_area", scope: !89, file: !3, line: 29, baseType: !95, size: 64, offset: 128)
!97 = !{!98}
!98 = !DISubrange(count: 1)
!99 = !DILocalVariable(name: "total", scope: !79, file: !3, line: 31, type: !13)
!100 = !DILocalVariable(name: "i", scope: !101, file: !3, line: 32, type: !13)
!101 = distinct !DILexicalBlock(scope: !79, file: !3, line: 32, column: 5)
!102 = distinct !DIAssignID()
!103 = !DILocation(line: 0, scope: !79)
!104 = !DILocation(line: 29, column: 5, scope: !79)
!107 = !DILocation(line: 32, column: 23, scope: !108)
!108 = distinct !DILexicalBlock(scope: !5)
!109 = !DILocation(line: 32, column: 5, scope: !101)
!110 = !DILocation(line: 33, column: 18, scope: !108)
!113 = !DILocation(line: 33, column: 15, scope: !108)
!114 = !DILocation(line: 34, column: 5, scope: !79)
!116 = !DILocation(line: 35, column: 5, scope: !79)
!117 = distinct !{!117, !109, !118, !119}
!118 = !DILocation(line: 33, column: 18, scope: !101)
!119 = !{!"llvm.loop.mustprogress"}
!120 = distinct !DISubprogram(name: "report", scope: !3, file: !3, line: 38, type: !121, scopeLine: 38, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !2, retainedNodes: !123)
!121 = !DISubroutineType(types: !122)
!122 = !{null, !13}
!123 = !{!124}
!124 = !DILocalVariable(name: "value", arg: 1, scope: !120, file: !3, line: 38, type: !13)
define dso_local i32 @find_first(ptr nocapture noundef readonly %0, i32 noundef %1, i32 noundef %2) local_unnamed_addr #3 !dbg !81 {
  %4 = icmp sgt i32 %1, 0, !dbg !92
  br i1 %4, label %5, label %17, !dbg !93
  %6 = zext nneg i32 %1 to i64, !dbg !92
  br label %7, !dbg !93
  %8 = phi i64 [ 0, %5 ], [ %13, %12 ]
  %9 = getelementptr inbounds i32, ptr %0, i64 %8, !dbg !94
  %10 = load i32, ptr %9, align 4, !dbg !94, !tbaa !97
  %11 = icmp eq i32 %10, %2, !dbg !99
  br i1 %11, label %15, label %12, !dbg !100
  %13 = add nuw nsw i64 %8, 1, !dbg !101
  %14 = icmp eq i64 %13, %6, !dbg !92
  br i1 %14, label %17, label %7, !dbg !93, !llvm.loop !102
  %16 = trunc nuw nsw i64 %8 to i32
  br label %17, !dbg !104
  %18 = phi i32 [ -1, %3 ], [ %16, %15 ], [ -1, %12 ], !dbg !91
  ret i32 %18, !dbg !104
}