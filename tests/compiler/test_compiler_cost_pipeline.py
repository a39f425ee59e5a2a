"""optserve.compiler.cost and .pipeline: objectives, applying pass lists, candidate evaluation, -Oz."""

from __future__ import annotations

import llvmlite.binding as llvm
import pytest

from optserve.compiler.cost import Objective, measure, text_size
from optserve.compiler.ir import IRError, instruction_count, split_functions
from optserve.compiler.pipeline import evaluate, optimize, oz_cost

OBJECTIVES = list(Objective)


def test_objective_names():
    assert [str(objective) for objective in Objective] == ["instruction_count", "text_size"]
    assert Objective("text_size") is Objective.TEXT_SIZE
    with pytest.raises(ValueError):
        Objective("speed")


def test_instruction_count_objective_is_the_instruction_count(c_ir):
    for ir in c_ir.values():
        assert measure(ir, "instruction_count") == instruction_count(ir)


def test_text_size_is_the_size_of_the_code_sections(c_ir):
    ir = c_ir["switch"]
    evaluation = evaluate(ir, (), Objective.TEXT_SIZE, want_object=True)
    sections = {s.name(): s.size() for s in llvm.ObjectFileRef.from_data(evaluation.object_code).sections()}
    assert (
        evaluation.cost == sections[b".text"] == text_size(evaluation.object_code) == measure(ir, "text_size")
    )
    assert evaluation.cost > 0


def test_text_size_is_for_the_host_and_other_targets_are_refused(c_ir):
    no_triple = "\n".join(line for line in c_ir["loops"].splitlines() if not line.startswith("target triple"))
    assert measure(no_triple, "text_size") == measure(c_ir["loops"], "text_size") > 0
    for triple in ("aarch64-linux-gnu", "nonsense-unknown-none"):
        foreign = c_ir["loops"].replace('"x86_64-pc-linux-gnu"', f'"{triple}"')
        with pytest.raises(IRError, match=f"target triple '{triple}' is not supported"):
            measure(foreign, "text_size")


def test_oz_shrinks_every_program(c_ir):
    for name, ir in c_ir.items():
        assert oz_cost(ir, "instruction_count") < measure(ir, "instruction_count"), name
        if name != "floating":
            assert oz_cost(ir, "text_size") < measure(ir, "text_size"), name


def test_oz_can_grow_code_of_functions_without_minsize(c_ir):
    """-O0 IR has no `minsize` attribute, so -Oz fully unrolls newton_sqrt's 20 iterations (as `opt` does)."""
    newton_sqrt = dict(split_functions(c_ir["floating"]))["newton_sqrt"]
    assert oz_cost(newton_sqrt, "text_size") > 2 * measure(newton_sqrt, "text_size")
    assert oz_cost(newton_sqrt, "instruction_count") > measure(newton_sqrt, "instruction_count")


def test_oz_cost_is_the_cost_of_the_oz_list(c_ir):
    for objective in OBJECTIVES:
        assert oz_cost(c_ir["structs"], objective) == evaluate(c_ir["structs"], ("-Oz",), objective).cost


def test_typed_pointer_ir_optimizes(typed_pointer_ir):
    assert oz_cost(typed_pointer_ir, "instruction_count") < instruction_count(typed_pointer_ir)
    assert oz_cost(typed_pointer_ir, "text_size") > 0


def test_optimize_is_pure_and_returns_valid_ir(c_ir):
    ir = c_ir["loops"]
    once = optimize(ir, ("-O2", "instcombine"))
    assert optimize(ir, ("-O2", "instcombine")) == once
    assert instruction_count(once) < instruction_count(ir)
    assert optimize(ir, ()) == optimize(ir, ()) and instruction_count(optimize(ir, ())) == instruction_count(
        ir
    )


def test_meta_flag_is_the_default_pipeline_applied_first(c_ir):
    ir = c_ir["floating"]
    in_one_run = optimize(ir, ("-Oz", "reg2mem"))
    assert instruction_count(in_one_run) == instruction_count(optimize(optimize(ir, ("-Oz",)), ("reg2mem",)))
    # reg2mem after -Oz puts loads and stores back.
    assert instruction_count(optimize(ir, ("-Oz", "reg2mem"))) > instruction_count(optimize(ir, ("-Oz",)))


def test_single_passes_compose(c_ir):
    ir = c_ir["recursion"]
    one_by_one = optimize(optimize(optimize(ir, ("sroa",)), ("instcombine",)), ("simplifycfg",))
    assert instruction_count(optimize(ir, ("sroa", "instcombine", "simplifycfg"))) == instruction_count(
        one_by_one
    )


def test_evaluation_reports_bad_pass_lists_and_ir_as_errors(c_ir):
    bad_list = evaluate(c_ir["loops"], ("instcombine", "-Oz"), "instruction_count")
    assert bad_list.cost is None and "meta flag -Oz must come first" in bad_list.error
    bad_ir = evaluate("define i32 @f( {", ("-Oz",), "instruction_count")
    assert bad_ir.cost is None and bad_ir.error.startswith("IRError: IR does not parse")
    assert not bad_ir.ok and bad_ir.pass_list == ("-Oz",)


def test_evaluation_returns_ir_and_object_code_on_request(c_ir):
    evaluation = evaluate(c_ir["switch"], ("-Oz",), "instruction_count", want_ir=True, want_object=True)
    assert evaluation.ok and evaluation.seconds > 0
    assert instruction_count(evaluation.optimized_ir) == evaluation.cost
    assert evaluation.object_code.startswith(b"\x7fELF")
    plain = evaluate(c_ir["switch"], ("-Oz",), "instruction_count")
    assert plain.optimized_ir is None and plain.object_code is None and plain.cost == evaluation.cost


def test_oz_on_split_functions(c_ir):
    for ir in c_ir.values():
        for name, function_ir in split_functions(ir):
            for objective in OBJECTIVES:
                assert oz_cost(function_ir, objective) > 0, name


def test_a_unit_with_inline_asm_compiles_to_an_object(compile_c, tmp_path):
    """Real units read the CPU with inline asm (opus' x86cpu.c, libuv): codegen needs the host's asm parser,
    without which LLVM aborts the whole process. In a pool, so a regression is a failed test, not a crash."""
    from optserve.compiler.workers import CompilerPool

    source = tmp_path / "cpuid.c"
    source.write_text(
        "unsigned leaf(unsigned a) { unsigned b, c, d; "
        '__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "=c"(c), "=d"(d)); return a ^ b ^ c ^ d; }\n'
    )
    with CompilerPool(processes=1, timeout_s=60) as pool:
        (result,) = pool.evaluate(compile_c(source), [("-Oz",)], "text_size")
    assert result.ok and result.cost > 0
