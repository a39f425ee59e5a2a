"""Per-function pass lists for a whole unit: split, optimize per function, link back
(compiler/function_lists.py, compiler/unit_search.py). Real IR: a C program compiled as optcc compiles it,
and units of real packages."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from optserve.compiler.cost import object_code, text_size
from optserve.compiler.function_lists import (
    FunctionLists,
    apply_function_lists,
    defined_function_count,
    split_unit,
)
from optserve.compiler.ir import parse_module
from optserve.compiler.pipeline import OZ, evaluate
from optserve.compiler.unit_search import (
    REFINE_PASSES,
    measure_functions,
    refine_functions,
    search_function_lists,
)
from optserve.compiler.workers import CompilerPool

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"
OPTCC_IR = ["-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-w"]  # as optcc asks clang
REAL_UNITS = Path(__file__).resolve().parents[2] / "data" / "real" / "units" / "examples"
# Lists of the coreset's kinds: no meta flag (no inliner), -Oz, another level, and one that leaves -O0 code.
LISTS = [("sroa", "jump-threading"), OZ, ("-O1",), ("-Os", "break-crit-edges"), ()]


@pytest.fixture(scope="module")
def program_ir() -> str:
    return subprocess.run(
        ["clang-19", *OPTCC_IR, str(PROGRAM), "-o", "-"], check=True, capture_output=True, text=True
    ).stdout


def _run_linked(object_file: bytes, tmp_path: Path) -> str:
    (tmp_path / "unit.o").write_bytes(object_file)
    subprocess.run(["clang-19", str(tmp_path / "unit.o"), "-o", str(tmp_path / "unit")], check=True)
    return subprocess.run([str(tmp_path / "unit")], check=True, capture_output=True, text=True).stdout


def _expected_output(tmp_path: Path) -> str:
    subprocess.run(["clang-19", "-O0", "-w", str(PROGRAM), "-o", str(tmp_path / "reference")], check=True)
    return subprocess.run([str(tmp_path / "reference")], check=True, capture_output=True, text=True).stdout


def test_a_helper_with_one_caller_joins_its_module_and_shared_or_table_helpers_do_not(program_ir):
    parts = split_unit(program_ir)
    assert parts.members["eval"][0] == "eval" and "find_op" in parts.members["eval"]
    assert "fib" in parts.members["eval"]  # recursive, but only eval calls it from outside
    assert "mix" in parts.functions  # called from eval and hash: a module of its own
    assert {"add", "sub", "mul", "mod"} <= set(parts.functions)  # reachable through the ops table
    assert parts.local_linkage["calls"] == "internal" and parts.local_linkage["mix"] == "internal"


@pytest.mark.parametrize("grouped", [False, True], ids=["split", "grouped"])
@pytest.mark.parametrize("rotation", range(len(LISTS)))
def test_a_program_with_a_different_list_per_function_runs_as_compiled_by_clang(
    program_ir, tmp_path, rotation, grouped
):
    names = list(split_unit(program_ir).functions)
    lists = {name: LISTS[(index + rotation) % len(LISTS)] for index, name in enumerate(names)}
    chosen = FunctionLists.of(lists, grouped=grouped)
    linked = apply_function_lists(program_ir, chosen, want_ir=True, want_object=True)
    assert linked.ok, linked.error
    assert _run_linked(linked.object_code, tmp_path) == _expected_output(tmp_path)
    assert linked.cost == text_size(linked.object_code)


def test_statics_stay_local_after_linking_and_dead_ones_are_dropped(program_ir):
    linked = apply_function_lists(program_ir, FunctionLists.of({}), want_ir=True)  # -Oz everywhere
    module = parse_module(linked.optimized_ir)
    functions = {f.name: f for f in module.functions if not f.is_declaration}
    assert functions["mix"].linkage.name == "internal"
    variables = {v.name: v for v in module.global_variables}  # get_global_variable skips internal ones
    assert variables["calls"].linkage.name == "internal" and variables[".str"].linkage.name == "private"
    assert "find_op" not in functions  # -Oz inlined it into its only caller; nothing else could call it
    assert functions["eval"].linkage.name == "external"


def test_every_function_at_oz_stays_close_to_the_whole_unit_at_oz(program_ir):
    """Splitting gives up inlining across modules; with helpers kept beside their only caller the unit
    grows little (the caller keeps the whole unit's -Oz when it is smaller)."""
    whole = evaluate(program_ir, OZ, "text_size").cost
    per_function = apply_function_lists(program_ir, FunctionLists.of({}), "text_size").cost
    assert per_function <= whole * 1.10


def test_grouped_functions_on_the_default_list_are_optimized_together_as_the_whole_unit(program_ir):
    """Grouped, the functions left on -Oz stay one module: with none on a list of its own that is the
    whole unit's -Oz; with one, its helpers stay local and dead statics go."""
    whole = evaluate(program_ir, OZ, "text_size").cost
    assert apply_function_lists(program_ir, FunctionLists.of({}, grouped=True), "text_size").cost == whole
    one = FunctionLists.of({"eval": ("sroa", "jump-threading")}, grouped=True)
    assert one.own(["eval", "hash", "mix"]) == ["eval"]
    linked = apply_function_lists(program_ir, one, want_ir=True)
    assert linked.ok, linked.error
    module = parse_module(linked.optimized_ir)
    functions = {f.name: f for f in module.functions if not f.is_declaration}
    assert functions["eval"].linkage.name == "external" and functions["mix"].linkage.name == "internal"
    variables = {v.name: v for v in module.global_variables}
    assert variables["calls"].linkage.name == "internal"


def test_a_list_that_breaks_gives_an_error_evaluation_not_an_exception(program_ir):
    result = apply_function_lists(program_ir, FunctionLists.of({"eval": ("no-such-pass",)}))
    assert not result.ok and "no-such-pass" in result.error


def test_the_pool_runs_function_lists_as_one_job_with_the_in_process_result(program_ir):
    lists = FunctionLists.of({"eval": ("sroa", "jump-threading"), "hash": ("-O1",)})
    with CompilerPool(processes=1, timeout_s=60) as pool:
        (pooled,) = pool.evaluate(program_ir, [lists], "text_size")
    assert pooled.ok and pooled.pass_list == lists
    assert pooled.cost == apply_function_lists(program_ir, lists, "text_size").cost


def test_search_picks_per_function_the_cheapest_list_measured_alone(program_ir, tmp_path):
    with CompilerPool(processes=2, timeout_s=60) as pool:
        chosen, unit = asyncio.run(
            search_function_lists(program_ir, LISTS[:4], "text_size", pool, want_object=True)
        )
    parts = split_unit(program_ir)
    for name, module_ir in parts.functions.items():
        costs = [evaluate(module_ir, p, "text_size").cost for p in LISTS[:4]]
        assert chosen.for_function(name) == LISTS[costs.index(min(costs))]
    assert unit.ok and _run_linked(unit.object_code, tmp_path) == _expected_output(tmp_path)


def test_the_function_count_is_read_without_parsing(program_ir):
    parts = split_unit(program_ir)
    assert defined_function_count(program_ir) == sum(len(m) for m in parts.members.values()) > 2


class _DiesOnFirstModule:
    """The real pool, except that the first function module's compile raises, as a compiler that died."""

    def __init__(self, pool: CompilerPool):
        self.pool = pool
        self.started = 0

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        self.started += 1
        if self.started == 1:
            raise ConnectionError("the compiler went away")
        return await self.pool.evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)


def test_a_module_whose_compile_raises_stops_the_other_modules(program_ir):
    """The error propagates and no other module starts compiling after it: a failed request leaves no work
    queued at the compiler (which, behind Ray, would go to the replica that replaces a dead one)."""
    parts = split_unit(program_ir)

    async def measure_then_wait(compiler):
        with pytest.raises(ConnectionError):
            await measure_functions(parts, LISTS[:2], "text_size", compiler, concurrency=1)
        await asyncio.sleep(1.0)  # time for any module left running to start compiling

    with CompilerPool(processes=1, timeout_s=60) as pool:
        compiler = _DiesOnFirstModule(pool)
        asyncio.run(measure_then_wait(compiler))
    # at most the module let in as the failed one left (then cancelled), of 8
    assert compiler.started <= 2 < len(parts.functions)


def test_refining_appends_one_pass_per_function_only_where_it_is_smaller(program_ir, tmp_path):
    """One local-search round: each function's best list with one more pass; a function keeps its list
    unless a longer one is smaller on its module, and the refined unit still runs."""
    parts = split_unit(program_ir)
    candidates = [("sroa",), ("sroa", "jump-threading")]  # weak lists, so a pass more helps some functions
    with CompilerPool(processes=2, timeout_s=60) as pool:
        measured = asyncio.run(measure_functions(parts, candidates, "text_size", pool))
        best = measured.best()
        refined, seconds = asyncio.run(refine_functions(parts, best, "text_size", pool))
        chosen, unit = asyncio.run(
            search_function_lists(program_ir, candidates, "text_size", pool, want_object=True, refine=True)
        )
    assert seconds > 0 and set(refined) == set(best)
    assert any(passes != best[name][0] for name, (passes, _) in refined.items())
    for name, (passes, cost) in refined.items():
        before, before_cost = best[name]
        assert cost <= before_cost
        if passes != before:  # the best list plus one of the refining passes, strictly smaller
            assert passes[:-1] == before and passes[-1] in REFINE_PASSES and cost < before_cost
            assert evaluate(parts.functions[name], passes, "text_size").cost == cost
    assert dict(chosen.lists) == {name: passes for name, (passes, _) in refined.items()}
    assert unit.ok and _run_linked(unit.object_code, tmp_path) == _expected_output(tmp_path)


def _real_units(count: int) -> list[str]:
    """First units of a train shard of the real-code corpus (data/real, built by corpus/real_corpus.py)."""
    shards = sorted(REAL_UNITS.glob("train-*.jsonl"))
    if not shards:
        pytest.skip("the real-code corpus (data/real) is not built on this machine")
    units = []
    for line in shards[0].open():
        ir = json.loads(line)["ir"]
        if 2_000 < len(ir) < 60_000:
            units.append(ir)
        if len(units) == count:
            return units
    return units


def test_real_units_link_verify_and_keep_their_defined_symbols():
    for ir in _real_units(5):
        names = {f.name for f in parse_module(ir).functions if not f.is_declaration}
        lists = {name: LISTS[index % len(LISTS)] for index, name in enumerate(sorted(names))}
        linked = apply_function_lists(ir, FunctionLists.of(lists), want_ir=True)
        assert linked.ok, linked.error
        module = parse_module(linked.optimized_ir)  # verifies
        kept = {f.name for f in module.functions if not f.is_declaration}
        linkage = {f.name: f.linkage.name for f in parse_module(ir).functions}
        assert {n for n in names if linkage[n] == "external"} <= kept  # other units may call them
        assert kept <= names  # nothing renamed or duplicated (passes may only delete)
        assert all(f.linkage.name == linkage[f.name] for f in module.functions if f.name in kept)
        assert linked.cost == text_size(object_code(module))


def test_a_debug_units_parts_carry_only_the_metadata_they_reach_and_split_as_with_all_of_it(monkeypatch):
    """With -g most of a unit's text is debug metadata; each part is given the lines it reaches (the
    split's `_Metadata`), and LLVM prints every part (and the shell) as when given every metadata line."""
    from optserve.compiler import function_lists

    ir = subprocess.run(
        ["clang-19", "-g", *OPTCC_IR, str(PROGRAM), "-o", "-"], capture_output=True, text=True, check=True
    ).stdout
    given: list[int] = []
    needed_by = function_lists._Metadata.needed_by

    def counted(self, text):
        lines = needed_by(self, text)
        given.append(len(lines))
        return lines

    monkeypatch.setattr(function_lists._Metadata, "needed_by", counted)
    parts = split_unit(ir)
    every = sum(1 for line in ir.splitlines() if line.startswith("!"))
    assert len(parts.functions) > 3 and max(given) < every  # the other functions' debug info left out
    monkeypatch.setattr(
        function_lists._Metadata,
        "needed_by",
        lambda self, text: [*self.named, *(line for _, line in sorted(self.numbered.values()))],
    )
    assert split_unit(ir) == parts


def _round_trip_object(ir: str, chosen: FunctionLists) -> bytes:
    """The object of `chosen` compiled through text: each function module printed by the split, parsed in
    its own context, optimized, printed, and parsed again into the shell's context to be linked (the
    compile whose objects the tuning store's lists were measured with before the one-context compile)."""
    import llvmlite.binding as llvm

    from optserve.compiler.function_lists import CLEANUP, _referenced_outside, _restore_local_linkage
    from optserve.compiler.pipeline import optimize_module

    parts = split_unit(ir)
    own = chosen.own(list(parts.functions))
    optimized = {}
    for name in own:
        module = parse_module(parts.functions[name], printed_here=True)
        optimize_module(module, chosen.for_function(name))
        optimized[name] = str(module)
        module.close()
    context = llvm.create_context()
    unit = llvm.parse_assembly(parts.shell, context=context)
    for name in parts.functions:
        if name not in optimized:
            unit.link_in(llvm.parse_assembly(parts.functions[name], context=context))
    if len(own) < len(parts.functions):  # grouped: the rest optimized as one module first
        modules = [llvm.parse_assembly(optimized[name], context=context) for name in own]
        used = frozenset(symbol for module in modules for symbol in _referenced_outside(module))
        _restore_local_linkage(unit, parts, keep=used)
        optimize_module(unit, chosen.default)
    else:
        modules = [llvm.parse_assembly(optimized[name], context=context) for name in parts.functions]
    for module in modules:
        unit.link_in(module)
    _restore_local_linkage(unit, parts)
    optimize_module(unit, CLEANUP)
    return object_code(unit)


@pytest.mark.parametrize("grouped", [False, True], ids=["split", "grouped"])
def test_the_one_context_compile_gives_the_objects_of_the_text_round_trip(grouped):
    """`apply_function_lists` optimizes and links the split's modules in one context, never printing them:
    a stored list's object must stay what it was measured as (a tuning profile's reproducibility), so it is
    the object of printing each module and parsing it back, byte for byte (a -g unit, and real units)."""
    debug_ir = subprocess.run(
        ["clang-19", "-g", *OPTCC_IR, str(PROGRAM), "-o", "-"], capture_output=True, text=True, check=True
    ).stdout
    for ir in [debug_ir, *_real_units(3)]:
        names = sorted(split_unit(ir).functions)
        lists = {name: LISTS[index % len(LISTS)] for index, name in enumerate(names) if index % 3 != 2}
        chosen = FunctionLists.of(lists, grouped=grouped)
        linked = apply_function_lists(ir, chosen, want_object=True)
        assert linked.ok, linked.error
        assert linked.object_code == _round_trip_object(ir, chosen)
