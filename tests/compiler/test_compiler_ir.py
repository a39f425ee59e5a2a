"""optserve.compiler.ir: parsing with clear errors, normalization, splitting, instruction counts."""

from __future__ import annotations

import re

import pytest

from optserve.compiler.ir import (
    IRError,
    instruction_count,
    normalize_ir,
    normalized_lines,
    parse_ir,
    split_functions,
)

LIMIT = 1 << 20


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("empty.ll", "empty IR"),
        ("syntax_error.ll", "does not parse: line 6, column 3: expected ',' in arithmetic operation"),
        ("undefined_value.ll", "line 4, column 17: use of undefined value '@nowhere'"),
        ("verifier_error.ll", "fails the LLVM verifier: Instruction does not dominate all uses"),
        ("not_utf8.ll", "neither bitcode nor UTF-8 text (invalid byte at offset 30)"),
        ("truncated.bc", "invalid bitcode"),
    ],
)
def test_malformed_input_gets_a_clear_error(fixture, message, ir_fixtures):
    with pytest.raises(IRError, match=re.escape(message)):
        parse_ir((ir_fixtures / fixture).read_bytes(), LIMIT)


def test_whitespace_only_text_is_empty():
    with pytest.raises(IRError, match="empty IR"):
        parse_ir(" \n\t", LIMIT)


def test_size_limit_applies_to_text_and_bytes(loops_ir):
    size = len(loops_ir.encode())
    for data in (loops_ir, loops_ir.encode()):
        with pytest.raises(IRError, match=f"IR is {size} bytes, more than the limit of {size - 1} bytes"):
            parse_ir(data, size - 1)
    assert parse_ir(loops_ir, size)


def test_nul_character_is_rejected():
    with pytest.raises(IRError, match="NUL character at offset 3"):
        parse_ir("abc\0def", LIMIT)


def test_text_ir_round_trips(c_ir):
    for name, ir in c_ir.items():
        parsed = parse_ir(ir, LIMIT)
        assert parse_ir(parsed, LIMIT) == parsed, name
        assert instruction_count(parsed) == instruction_count(ir)


def test_bitcode_is_accepted_and_returned_as_text(c_ir, c_sources, compile_c):
    bitcode = compile_c(c_sources["structs"], text=False)
    assert bitcode[:4] == b"BC\xc0\xde"
    text = parse_ir(bitcode, LIMIT)
    assert "define dso_local i32 @area" in text
    assert instruction_count(text) == instruction_count(c_ir["structs"])


def test_typed_pointer_ir_is_upgraded_to_opaque_pointers(typed_pointer_ir):
    text = parse_ir(typed_pointer_ir, LIMIT)
    assert "i32*" not in text and "%struct.pair*" not in text
    assert "define dso_local i32 @sum_pairs(ptr %pairs, i32 %count)" in text
    assert instruction_count(text) == 42


def test_instruction_count_counts_every_instruction_in_bodies_only():
    ir = """
    declare i32 @g(i32)
    define i32 @f(i32 %a) {
    entry:
      %b = add i32 %a, 1
      br label %next
    next:
      %c = call i32 @g(i32 %b)
      switch i32 %c, label %done [
        i32 0, label %done
        i32 1, label %next
      ]
    done:
      ret i32 %c
    }
    """
    assert instruction_count(ir) == 5


def test_normalization_drops_comments_debug_info_and_attributes(c_sources, compile_c):
    source = c_sources["structs"]
    with_debug_info = compile_c(source, "-g")
    assert "!dbg" in with_debug_info and "attributes #0" in with_debug_info
    normalized = normalize_ir(with_debug_info)
    for dropped in (";", "!dbg", "#dbg_", "attributes #", "#0", "noundef", "dso_local", "llvm.dbg", "  "):
        assert dropped not in normalized, dropped
    assert all(line == line.strip() for line in normalized.splitlines())
    # Debug info is all that differs, so both normalize to the same text.
    assert normalized == normalize_ir(compile_c(source))


def test_normalization_keeps_instructions_and_is_idempotent(c_ir, typed_pointer_ir):
    for name, ir in {**c_ir, "typed_pointers": typed_pointer_ir}.items():
        normalized = normalize_ir(ir)
        assert instruction_count(normalized) == instruction_count(ir), name
        assert len(normalized) < len(ir)
        assert normalize_ir(normalized) == normalized, name


def test_normalization_keeps_semicolons_at_signs_and_spacing_around_strings():
    ir = '@s = constant [10 x i8] c"a;b @c #0\\00" ; trailing comment\n@"odd name" = global i32 0\n'
    assert normalize_ir(ir) == '@s = constant [10 x i8] c"a;b @c #0\\00"\n@"odd name" = global i32 0\n'


def test_normalized_lines_are_the_tuning_stores_keys_text():
    """The text a key hashes (`normalized_lines`: comments, metadata, attribute groups, debug records and
    boilerplate words dropped; quoted strings kept as they are), pinned: a change of it would leave every
    tuning store's entries unreachable."""
    printed = (
        'source_filename = "a;b.c"\n'
        '@s = dso_local constant [4 x i8] c"x;!\\00", align 1, !dbg !0 ; comment "\n'
        "define dso_local noundef i32 @f(i32 noundef %x) #0 !dbg !7 {\n"
        "  %y = add nsw i32 %x, 1, !dbg !9 ; %y\n"
        "    #dbg_value(i32 %x, !1, !DIExpression(), !2)\n"
        "  call void @llvm.dbg.declare(metadata ptr %p, metadata !3, metadata !DIExpression()), !dbg !4\n"
        "  ret i32 %y, !dbg !10\n"
        "}\n"
        "   !0 = !{}\n"
        'attributes #0 = { "frame-pointer"="none;x" }\n'
        '; ModuleID = "m"\n'
    )
    assert normalized_lines(printed) == (
        '@s = constant [4 x i8] c"x;!\\00", align 1\ndefine i32 @f(i32 %x) {\n%y = add nsw i32 %x, 1\n'
        "ret i32 %y\n}\n"
    )


def test_split_gives_one_valid_module_per_defined_function(c_ir):
    for name, ir in c_ir.items():
        parts = split_functions(ir)
        defined = {line.split("@")[1].split("(")[0] for line in ir.splitlines() if line.startswith("define ")}
        assert {function for function, _ in parts} == defined, name
        for function, module in parts:
            definitions = [line for line in module.splitlines() if line.startswith("define ")]
            assert len(definitions) == 1 and f"@{function}(" in definitions[0]
        assert sum(instruction_count(module) for _, module in parts) == instruction_count(ir)


def test_split_keeps_static_functions_and_what_they_reference(c_ir):
    parts = dict(split_functions(c_ir["globals"]))
    # A static function becomes external so that its module does not optimize it away.
    assert "define i32 @twice(" in parts["twice"] or "define dso_local i32 @twice(" in parts["twice"]
    assert "internal" not in parts["twice"].split("define", 1)[1].split("(")[0]
    # Constant tables keep their initializer; what they point to is declared.
    assert "@operations = dso_local constant [2 x ptr] [ptr @twice, ptr @square]" in parts["apply"]
    assert "declare i32 @twice(i32)" in parts["apply"]
    # Mutable globals become external declarations; variadic callees keep their signature.
    assert "@hidden_state = external global i32" in parts["report"]
    assert "declare i32 @printf(ptr, ...)" in parts["report"]
    assert "@counter = external global i32" in parts["bump"]


def test_split_of_mutually_recursive_functions(c_ir):
    parts = dict(split_functions(c_ir["recursion"]))
    assert "declare i32 @is_odd(i32)" in parts["is_even"]
    assert "define" in parts["is_odd"] and "declare i32 @is_even(i32)" in parts["is_odd"]


def test_a_foreign_target_is_refused_and_leaves_later_costs_unchanged(c_ir):
    from optserve.compiler.cost import Objective, measure

    before = measure(c_ir["loops"], Objective.TEXT_SIZE)
    foreign = re.sub(r'target triple = "[^"]*"', 'target triple = "hexagon"', c_ir["loops"])
    foreign = re.sub(r'target datalayout = "[^"]*"\n', "", foreign)
    with pytest.raises(IRError, match="target triple 'hexagon' is not supported"):
        parse_ir(foreign, LIMIT)
    with pytest.raises(IRError, match="not supported"):
        measure(foreign, Objective.TEXT_SIZE)
    assert measure(c_ir["loops"], Objective.TEXT_SIZE) == before


def test_split_keeps_a_function_that_uses_a_global_of_a_named_struct_type():
    """llvmlite prints a named struct type alone as its definition; the declaration must use its name."""
    ir = (
        "%struct.counter = type { i32, ptr }\n"
        "@state = global %struct.counter zeroinitializer\n"
        "define i32 @bump() {\n  %v = load i32, ptr @state\n  %w = add i32 %v, 1\n"
        "  store i32 %w, ptr @state\n  ret i32 %w\n}\n"
    )
    [(name, module)] = split_functions(ir)
    assert name == "bump" and "@state = external global %struct.counter" in module


def test_the_nesting_guard_counts_brackets_outside_strings_and_comments_only():
    from optserve.compiler.ir import MAX_NESTING

    deep = "(" * (MAX_NESTING + 1) + ")" * (MAX_NESTING + 1)
    with pytest.raises(IRError, match=f"{MAX_NESTING + 1} levels deep"):
        parse_ir(f"@x = global i32 0 ; fine\n@y = external global {deep}\n", 2**20)
    quoted = f'@s = constant [2 x i8] c"{deep[: MAX_NESTING + 1]}" ; {deep}\n'
    with pytest.raises(IRError) as raised:  # not for nesting: the string's brackets do not count
        parse_ir(quoted, 2**20)
    assert "levels deep" not in str(raised.value)
