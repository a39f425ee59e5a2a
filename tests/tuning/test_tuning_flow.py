"""The service's fast path through the tuning store (Ray-free Optimizer, real compiler pool, real SQLite
store): units are recorded, stored lists are compiled as one candidate, a store that fails costs nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from optserve.compiler.cache import ResultCache
from optserve.compiler.function_lists import FunctionLists, apply_function_lists, split_unit
from optserve.compiler.passes import format_pass_list
from optserve.config import Settings
from optserve.serve import schemas
from optserve.tuning.lookup import is_build_probe, toolchain_of
from optserve.tuning.records import TunedList
from optserve.tuning.store import TuningStoreError, open_store
from optserve.tuning.unit_keys import unit_keys
from tests.serve.flow_helpers import ScriptedGenerator, optimize
from tests.tuning.entries import compile_to_ir

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"
SETTINGS = Settings.model_validate({"engine": {"coreset_lists_with_model": 0, "unit_function_lists": 0}})
# A list that is not -Oz: whatever it costs, the answer ranks it against -Oz.
OTHER_LIST = ("instcombine", "simplifycfg")


@pytest.fixture(scope="module")
def unit_ir() -> str:
    return compile_to_ir(PROGRAM.read_text())


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "tuning.sqlite3")) as opened:
        yield opened


@pytest.fixture(scope="module")
def pool():
    from optserve.compiler.workers import CompilerPool

    with CompilerPool(processes=2, timeout_s=20) as compiler_pool:
        yield compiler_pool


def stored_request(ir: str, **fields) -> schemas.OptimizeRequest:
    options = {"objective": "text_size", "strategy": "stored", "bypass_cache": True} | fields
    return schemas.OptimizeRequest(ir=ir, **options)


def run(pool, store, request, generator=None, cache=None):
    from optserve.serve.optimize.optimizer import Optimizer

    generator = generator or ScriptedGenerator([("-Oz",)])
    optimizer = Optimizer(SETTINGS, generator, pool, cache or ResultCache(10), generator.metadata, store)
    return asyncio.run(optimizer.optimize(request))


def function_entries(ir: str, pass_list=OTHER_LIST) -> list[TunedList]:
    keys = unit_keys(ir, max_functions=200)
    toolchain = toolchain_of(ir, "text_size")
    return [
        TunedList(h, toolchain, "function", pass_list, (), 100, 101, 10, "test", time.time())
        for h in sorted(set(keys.function_hashes.values()))
    ]


def test_a_unit_is_recorded_once_and_an_empty_store_answers_minus_oz_with_no_model_call(pool, store, unit_ir):
    generator = ScriptedGenerator([OTHER_LIST])
    first = run(pool, store, stored_request(unit_ir, unit_name="calc.c"), generator)
    second = run(pool, store, stored_request(unit_ir, unit_name="calc.c"), generator)
    assert first.tuning.recorded and not second.tuning.recorded
    assert [c.source for c in first.candidates] == ["oz"] and generator.calls == []
    (recorded,) = list(store.recorded_units())
    assert recorded.name == "calc.c" and recorded.times_seen == 2
    assert first.tuning.functions == 0 and first.tuning.function_hits == 0  # no function entries: no split


def test_a_unit_is_split_for_its_functions_keys_once_the_store_holds_function_entries(pool, store, unit_ir):
    other = compile_to_ir("int other(int x) { return x * 3 + 1; }\nint more(int y) { return other(y) - 2; }")
    store.offer(function_entries(other))  # entries of another unit's functions: none of this unit's
    response = run(pool, store, stored_request(unit_ir))
    assert response.tuning.functions == len(split_unit(unit_ir).functions)
    assert response.tuning.function_hits == 0


def test_stored_function_lists_make_one_candidate_compiled_against_minus_oz(pool, store, unit_ir):
    store.offer(function_entries(unit_ir))
    response = run(pool, store, stored_request(unit_ir, return_object=True))
    (tuned,) = [c for c in response.candidates if c.source == "tuned"]
    names = set(split_unit(unit_ir).functions)
    assert set(tuned.function_passes) == names
    assert set(tuned.function_passes.values()) == {format_pass_list(OTHER_LIST)}
    assert response.tuning.function_hits == len(names) and not response.tuning.unit_hit
    assert {c.source for c in response.candidates} == {"tuned", "oz"}
    assert response.best.cost <= response.oz_cost  # never worse than -Oz, whichever won


def test_a_whole_unit_entry_wins_over_function_entries(pool, store, unit_ir):
    store.offer(function_entries(unit_ir))
    keys = unit_keys(unit_ir, max_functions=200)
    toolchain = toolchain_of(unit_ir, "text_size")
    lists = (("main", OTHER_LIST),)
    unit_entry = TunedList(keys.unit_hash, toolchain, "unit", ("-Oz",), lists, 5, 6, 3, "test", time.time())
    store.offer([unit_entry])
    response = run(pool, store, stored_request(unit_ir))
    (tuned,) = [c for c in response.candidates if c.source == "tuned"]
    assert tuned.function_passes == {"main": format_pass_list(OTHER_LIST)}
    assert response.tuning.unit_hit and response.tuning.function_hits == 0


def test_a_one_function_edit_keeps_the_other_functions_keys(unit_ir):
    source = PROGRAM.read_text()
    fib = "static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }"
    edited = source.replace(fib, fib.replace("n < 2", "n < 3"))
    assert edited != source
    before = unit_keys(unit_ir, max_functions=200)
    after = unit_keys(compile_to_ir(edited), max_functions=200)
    changed = {n for n in before.function_hashes if before.function_hashes[n] != after.function_hashes.get(n)}
    assert before.unit_hash != after.unit_hash
    # fib's own module changes, and so does the module it joined (its caller's), nothing else
    assert 0 < len(changed) <= 2 and len(changed) < len(before.function_hashes)


def test_the_tuned_candidate_costs_what_its_lists_cost_applied_outside_the_service(unit_ir, pool, store):
    store.offer(function_entries(unit_ir))
    response = run(pool, store, stored_request(unit_ir))
    tuned = next(c for c in response.candidates if c.source == "tuned")
    lists = FunctionLists.of(dict.fromkeys(split_unit(unit_ir).functions, OTHER_LIST))
    assert tuned.error == "" and tuned.cost == apply_function_lists(unit_ir, lists, "text_size").cost


class _FailingStore:
    """A store whose every call fails as a broken database would (the real failures are tested with the
    real backends in test_tuning_store*.py)."""

    read_only = False

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise TuningStoreError("database disk image is malformed")

        return fail


def test_a_failing_store_costs_the_answer_nothing_but_its_lists(pool, unit_ir):
    response = run(pool, _FailingStore(), stored_request(unit_ir))
    assert [c.source for c in response.candidates] == ["oz"] and not response.tuning.recorded


def test_answers_cached_before_tuning_are_not_served_after_it(pool, store, unit_ir):
    cache = ResultCache(10)
    request = schemas.OptimizeRequest(ir=unit_ir, objective="text_size", strategy="stored")
    before = run(pool, store, request, cache=cache)
    store.offer(function_entries(unit_ir))
    after = run(pool, store, request, cache=cache)
    assert not after.cached and "tuned" in {c.source for c in after.candidates}
    assert before.candidates[0].source == "oz"


def test_without_a_store_the_flow_is_unchanged(pool, unit_ir):
    response = optimize(ScriptedGenerator([OTHER_LIST]), pool, stored_request(unit_ir), settings=SETTINGS)
    assert [c.source for c in response.candidates] == ["oz"] and response.tuning == schemas.TuningStoreHits()


def test_a_profile_gives_the_same_objects_as_the_store_it_was_exported_from(pool, store, unit_ir, tmp_path):
    """Profile round trip: store -> export -> a fresh store imports it, and a service serving only the
    profile (`tuning.profile`, read-only) -> the same object bytes as the store it came from."""
    from optserve.tuning.profile import export_profile, import_profile

    store.offer(function_entries(unit_ir))
    request = stored_request(unit_ir, return_object=True)
    from_store = run(pool, store, request)
    profile = tmp_path / "project.optserve-profile.json"
    assert export_profile(store, profile) == len(set(unit_keys(unit_ir, 200).function_hashes.values()))
    with open_store(str(tmp_path / "fresh.sqlite3")) as fresh:
        import_profile(fresh, profile)
        from_import = run(pool, fresh, request)
    with open_store(f"profile:{profile}", read_only=True) as served:
        from_profile = run(pool, served, request)
        assert not from_profile.tuning.recorded  # a profile is read-only: nothing recorded
    assert from_store.object_code == from_import.object_code == from_profile.object_code
    assert from_store.best.source == from_profile.best.source


class _CountingCompiler:
    """The real pool, counting the jobs it is given (how many compiles an answer cost)."""

    def __init__(self, pool):
        self.pool, self.jobs = pool, []

    async def evaluate_async(self, ir, jobs, *args, **kwargs):
        self.jobs += list(jobs)
        return await self.pool.evaluate_async(ir, jobs, *args, **kwargs)

    async def run_async(self, *args, **kwargs):  # the service's intake, as the pool runs it
        return await self.pool.run_async(*args, **kwargs)


def unit_entry(ir: str, cost: int, oz_cost: int) -> TunedList:
    keys = unit_keys(ir, max_functions=200)
    lists = tuple((name, OTHER_LIST) for name in sorted(keys.function_hashes))
    return TunedList(keys.unit_hash, toolchain_of(ir, "text_size"), "unit", ("-Oz",), lists, cost, oz_cost, 9,
                     "test", time.time())  # fmt: skip


def test_a_whole_unit_entry_is_one_compile_and_reports_the_minus_oz_tuning_measured(pool, store, unit_ir):
    lists = FunctionLists.of(dict.fromkeys(split_unit(unit_ir).functions, OTHER_LIST), default=("-Oz",))
    real = apply_function_lists(unit_ir, lists, "text_size", want_object=True)
    store.offer([unit_entry(unit_ir, real.cost, real.cost + 10)])  # tuning found it 10 bytes below -Oz
    compiler = _CountingCompiler(pool)
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True)
    response = run(compiler, store, as_optcc_asks)
    assert len(compiler.jobs) == 1 and response.tuning.unit_hit
    assert response.best.source == "tuned" and response.oz_cost == real.cost + 10
    assert response.object_code == real.object_code


def test_a_whole_unit_entry_that_does_not_hold_up_gets_minus_oz_compiled(pool, store, unit_ir):
    store.offer([unit_entry(unit_ir, 1, 2)])  # claims far less than its lists really cost
    compiler = _CountingCompiler(pool)
    response = run(compiler, store, stored_request(unit_ir, return_object=True))
    assert ("-Oz",) in compiler.jobs and response.oz_cost > 2
    assert response.best.cost <= response.oz_cost and response.object_code


@pytest.mark.parametrize(
    ("name", "probe"),
    [
        ("conftest.c", True),
        ("/tmp/build/conftest.cpp", True),
        ("_build/CMakeFiles/CMakeScratch/TryCompile-x/src.c", True),
        ("build/meson-private/sanitycheckc.c", True),
        ("src/conftest_helpers.c", False),
        ("src/lib.c", False),
        ("", False),
    ],
)
def test_build_system_probes_are_told_apart_from_the_product(name, probe):
    assert is_build_probe(name) is probe


def test_a_configure_probe_is_answered_but_not_recorded(pool, store, unit_ir):
    response = run(pool, store, stored_request(unit_ir, unit_name="conftest.c"))
    assert not response.tuning.recorded and list(store.recorded_units()) == []


def test_an_answer_is_settled_once_its_unit_is_tuned_or_the_store_a_profile(pool, store, unit_ir, tmp_path):
    from optserve.tuning.profile import export_profile

    before = run(pool, store, stored_request(unit_ir))
    store.set_tuned_budget(unit_keys(unit_ir, 200).unit_hash, toolchain_of(unit_ir, "text_size"), 300)
    after = run(pool, store, stored_request(unit_ir))
    export_profile(store, tmp_path / "p.json")
    with open_store(f"profile:{tmp_path / 'p.json'}", read_only=True) as profile:
        served = run(pool, profile, stored_request(unit_ir))
    assert (before.tuning.settled, after.tuning.settled, served.tuning.settled) == (False, True, True)


def test_a_client_that_compares_gets_a_unit_with_nothing_stored_answered_without_a_compile(
    pool, store, unit_ir
):
    compiler = _CountingCompiler(pool)
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True, client_compares=True)
    response = run(compiler, store, as_optcc_asks)
    assert compiler.jobs == [] and response.tuning.recorded  # recorded for tuning all the same
    assert [c.source for c in response.candidates] == ["client_baseline"]
    assert response.best.cost == -1 and response.oz_skipped and response.object_code is None


def test_a_client_that_compares_gets_the_tuned_object_from_one_compile_and_no_minus_oz(pool, store, unit_ir):
    store.offer(function_entries(unit_ir))
    compiler = _CountingCompiler(pool)
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True, client_compares=True)
    response = run(compiler, store, as_optcc_asks)
    (job,) = compiler.jobs
    assert isinstance(job, FunctionLists) and ("-Oz",) not in compiler.jobs
    lists = FunctionLists.of(dict.fromkeys(split_unit(unit_ir).functions, OTHER_LIST), default=("-Oz",))
    real = apply_function_lists(unit_ir, lists, "text_size", want_object=True)
    assert [c.source for c in response.candidates] == ["tuned", "client_baseline"]
    assert response.best.cost == real.cost and response.object_code == real.object_code


class _FailingCompiler:
    """The real pool, with every candidate's compile reported failed (as a crashed compile would be)."""

    def __init__(self, pool):
        self.pool = pool

    async def evaluate_async(self, ir, jobs, *args, **kwargs):
        from dataclasses import replace

        evaluations = await self.pool.evaluate_async(ir, jobs, *args, **kwargs)
        return [replace(e, cost=None, error="crashed", object_code=None) for e in evaluations]

    async def run_async(self, *args, **kwargs):  # the service's intake, as the pool runs it
        return await self.pool.run_async(*args, **kwargs)


def test_a_client_that_compares_keeps_its_own_object_when_the_tuned_lists_fail(pool, store, unit_ir):
    store.offer(function_entries(unit_ir))
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True, client_compares=True)
    response = run(_FailingCompiler(pool), store, as_optcc_asks)
    assert [c.source for c in response.candidates] == ["client_baseline", "tuned"]
    assert response.best.source == "client_baseline" and response.object_code is None


def test_a_unit_tuned_without_an_entry_of_its_own_is_answered_without_a_split(pool, store, unit_ir):
    store.offer(function_entries(unit_ir))  # its functions have lists; the unit did not beat -Oz with them
    store.set_tuned_budget(unit_keys(unit_ir, 200).unit_hash, toolchain_of(unit_ir, "text_size"), 300)
    compiler = _CountingCompiler(pool)
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True, client_compares=True)
    response = run(compiler, store, as_optcc_asks)
    assert compiler.jobs == [] and response.tuning.functions == 0 and response.tuning.settled


def test_a_stored_answer_saving_less_than_the_bar_is_not_compiled_and_gets_minus_oz(pool, store, unit_ir):
    """`tuning.min_saved_bytes`: a unit entry saving 10 bytes is compiled under a bar of 10, and under a
    bar of 11 the unit gets -Oz settled (optcc keeps clang's object) with no compile at all."""
    store.offer([unit_entry(unit_ir, 500, 510)])
    store.set_tuned_budget(unit_keys(unit_ir, 200).unit_hash, toolchain_of(unit_ir, "text_size"), 300)
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True, client_compares=True)
    for bar, compiled in ((10, True), (11, False)):
        compiler = _CountingCompiler(pool)
        response = run_with(compiler, store, as_optcc_asks, {"min_saved_bytes": bar})
        assert bool(compiler.jobs) == compiled and response.tuning.settled
        assert response.tuning.unit_hit == compiled
        if not compiled:
            assert [c.source for c in response.candidates] == ["client_baseline"]


def test_function_entries_saving_less_than_the_bar_together_make_no_candidate(pool, store, unit_ir):
    entries = function_entries(unit_ir)  # each saves 1 byte on its own function
    store.offer(entries)
    as_optcc_asks = stored_request(unit_ir, return_object=True, skip_input_cost=True, client_compares=True)
    for bar, compiled in ((len(entries), True), (len(entries) + 1, False)):
        compiler = _CountingCompiler(pool)
        response = run_with(compiler, store, as_optcc_asks, {"min_saved_bytes": bar})
        assert bool(compiler.jobs) == compiled and response.tuning.function_hits == len(entries)


def test_the_default_bar_is_the_settings_and_a_test_session_lowers_it_to_zero():
    """The service's default keeps answers worth a compile (docs/tuning.md); tests/conftest.py sets 0 for
    the suites, whose hand-made entries save a byte or two."""
    from optserve.config import TuningSettings

    assert TuningSettings.model_fields["min_saved_bytes"].default == 32
    assert Settings().tuning.min_saved_bytes == 0


def run_with(compiler, store, request, tuning: dict):
    from optserve.serve.optimize.optimizer import Optimizer

    settings = SETTINGS.model_copy(update={"tuning": SETTINGS.tuning.model_copy(update=tuning)})
    generator = ScriptedGenerator([("-Oz",)])
    optimizer = Optimizer(settings, generator, compiler, ResultCache(10), generator.metadata, store)
    return asyncio.run(optimizer.optimize(request))
