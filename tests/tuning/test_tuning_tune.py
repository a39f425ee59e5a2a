"""`optserve tune`: the off-critical-path search that fills the tuning store (real Ray tasks, real compiles
through local_search, a real SQLite store)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optserve.cli import main
from optserve.compiler.function_lists import FunctionLists, apply_function_lists
from optserve.compiler.pipeline import OZ, evaluate
from optserve.tuning.lookup import toolchain_of
from optserve.tuning.profile import read_profile
from optserve.tuning.store import open_store
from optserve.tuning.tune import search_plan, tune
from optserve.tuning.unit_keys import unit_keys
from tests.tuning.entries import compile_to_ir

SOURCES = Path(__file__).resolve().parent.parent / "data" / "c"
UNITS = ("switch.c", "recursion.c", "loops.c")
BUDGET = 10
OBJECTIVE = "text_size"
MAX_FUNCTIONS = 200
# Coreset-like seeds (the bundled coreset's lists are what the CLI uses; these keep the test self-contained).
CORESET = (("-Os",), ("-O2",), ("instcombine", "simplifycfg"), ("-Oz", "instcombine"))


# One function: no split, the unit is searched as one.
SINGLE = "int sum(const int *v, int n) { int s = 0; for (int i = 0; i < n; i++) s += v[i] * i; return s; }"


def record(store, irs: dict[str, str]) -> None:
    for name, ir in irs.items():
        store.record_unit(unit_keys(ir, MAX_FUNCTIONS).unit_hash, ir, name)


def plan(budget: int = BUDGET):
    return search_plan(OBJECTIVE, budget, CORESET)


@pytest.fixture(scope="module")
def irs() -> dict[str, str]:
    units = {name: compile_to_ir((SOURCES / name).read_text()) for name in UNITS}
    return units | {"sum.c": compile_to_ir(SINGLE)}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, irs, local_ray):
    """A store with the units recorded and tuned once at BUDGET: (store URL, that run's summary)."""
    url = str(tmp_path_factory.mktemp("tuned") / "tuning.sqlite3")
    with open_store(url) as store:
        record(store, irs)
        summary = tune(store, plan(), max_functions=MAX_FUNCTIONS)
    return url, summary


def test_tuning_stores_answers_never_worse_than_oz_and_sets_each_units_budget(tuned, irs):
    url, summary = tuned
    assert summary.units == len(irs) and summary.units_failed == 0, summary.failures
    assert summary.functions > 0 and summary.compiles > 0
    with open_store(url, read_only=True) as store:
        for ir in irs.values():
            keys, toolchain = unit_keys(ir, MAX_FUNCTIONS), toolchain_of(ir, OBJECTIVE)
            assert store.tuned_budget(keys.unit_hash, toolchain) == BUDGET
            functions = store.lookup_functions(sorted(keys.function_hashes.values()), toolchain)
            assert set(functions) == set(keys.function_hashes.values())  # every function searched
            for entry in functions.values():
                assert entry.cost <= entry.oz_cost and entry.compiles >= BUDGET
                assert entry.cost < entry.oz_cost or entry.pass_list == OZ  # -Oz: searched, nothing better
            unit = store.lookup_unit(keys.unit_hash, toolchain)
            oz = evaluate(ir, OZ, OBJECTIVE).cost
            if unit is not None:  # measured again: the stored answer is what it claims, and beats -Oz
                job = FunctionLists.of(dict(unit.function_lists), default=unit.pass_list)
                again = apply_function_lists(ir, job, OBJECTIVE) if unit.function_lists else None
                cost = again.cost if again else evaluate(ir, unit.pass_list, OBJECTIVE).cost
                assert cost == unit.cost < unit.oz_cost == oz


def test_a_second_run_at_the_same_budget_compiles_nothing(tuned, irs):
    url, _ = tuned
    with open_store(url) as store:
        again = tune(store, plan(), max_functions=MAX_FUNCTIONS)
    assert (again.units, again.units_at_budget, again.compiles, again.workers) == (0, len(irs), 0, 0)


def test_a_killed_run_keeps_what_it_wrote_and_the_next_run_finishes(tmp_path, irs, local_ray):
    url = str(tmp_path / "tuning.sqlite3")
    with open_store(url) as store:
        record(store, irs)
    budget = BUDGET
    import ray

    # The run joins this test's Ray (as a cluster's driver would): its tasks die with it.
    address = ray.get_runtime_context().gcs_address
    command = [sys.executable, "-m", "optserve.cli", "tune", "--store", url, "--budget", str(budget)]
    process = subprocess.Popen(
        [*command, "--ray-address", address], start_new_session=True, stderr=subprocess.DEVNULL
    )
    toolchains = {ir: toolchain_of(ir, OBJECTIVE) for ir in irs.values()}
    hashes = {ir: unit_keys(ir, MAX_FUNCTIONS).unit_hash for ir in irs.values()}
    try:
        with open_store(url, read_only=True) as store:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None:
                if any(store.tuned_budget(hashes[ir], toolchains[ir]) for ir in irs.values()):
                    break
                time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with open_store(url) as store:
        done = [ir for ir in irs.values() if store.tuned_budget(hashes[ir], toolchains[ir]) == budget]
        assert 1 <= len(done) < len(irs), "the kill came after the first unit and before the last"
        left = {
            h
            for ir in irs.values()
            if ir not in done
            for h in unit_keys(ir, MAX_FUNCTIONS).function_hashes.values()
        }
        written = set(store.lookup_functions(sorted(left), toolchain_of(irs["switch.c"], OBJECTIVE)))
        resumed = tune(store, plan(budget), max_functions=MAX_FUNCTIONS)
        assert resumed.units == len(irs) - len(done) and resumed.units_at_budget == len(done)
        # What the killed run wrote is not searched again; only the functions it had not reached are.
        assert (resumed.functions_at_budget, resumed.functions) == (len(written), len(left - written))
        assert all(store.tuned_budget(hashes[ir], toolchains[ir]) == budget for ir in irs.values())


def test_export_and_import_through_the_cli_carry_every_entry(tuned, tmp_path, capsys):
    url, _ = tuned
    profile, fresh = tmp_path / "project.optprofile", str(tmp_path / "fresh.sqlite3")
    assert main(["tune", "export", str(profile), "--store", url]) == 0
    assert main(["tune", "--store", fresh, "import", str(profile)]) == 0
    with open_store(url, read_only=True) as source, open_store(fresh, read_only=True) as copy:
        assert [e.pass_list for e in copy.entries()] == [e.pass_list for e in source.entries()]
        assert [e.cost for e in copy.entries()] == [e.cost for e in source.entries()]
    other = tmp_path / "other.optprofile"
    assert main(["tune", "export", str(other), "--objective", "instruction_count", "--store", url]) == 0
    assert read_profile(other) == []  # the store was tuned for text_size only
    capsys.readouterr()
    assert main(["tune", "stats", "--json", "--store", fresh]) == 0
    assert '"function_entries"' in capsys.readouterr().out


def test_a_build_command_runs_first_with_optcc_as_cc(tmp_path):
    out, url = tmp_path / "cc.txt", str(tmp_path / "tuning.sqlite3")
    build = ["sh", "-c", f'echo "$CC $CXX" > {out}']
    assert main(["tune", "--store", url, "--", *build]) == 0
    cc, cxx = out.read_text().split()
    assert (Path(cc).name, Path(cxx).name) == ("optcc", "optcc++")
    assert main(["tune", "--store", url, "--", "sh", "-c", "exit 3"]) == 3  # a failed build: no tuning


def test_a_run_at_a_higher_budget_goes_on_from_the_stored_lists(tuned, irs):
    url, _ = tuned
    with open_store(url) as store:
        hashes = {
            h: toolchain_of(ir, OBJECTIVE)
            for ir in irs.values()
            for h in unit_keys(ir, MAX_FUNCTIONS).function_hashes.values()
        }
        before = {h: store.lookup_functions([h], t)[h] for h, t in hashes.items()}
        summary = tune(store, plan(BUDGET + 4), max_functions=MAX_FUNCTIONS)
        after = {h: store.lookup_functions([h], t)[h] for h, t in hashes.items()}
        assert summary.units == len(irs) and summary.functions == len(hashes)
        for h in hashes:  # never worse than what the lower budget found, and the compiles add up
            assert after[h].cost <= before[h].cost and after[h].compiles >= before[h].compiles + BUDGET + 4
        assert all(
            store.tuned_budget(unit_keys(ir, MAX_FUNCTIONS).unit_hash, toolchain_of(ir, OBJECTIVE))
            == BUDGET + 4
            for ir in irs.values()
        )


def test_the_summary_counts_unit_answers_below_the_services_bar_apart_and_says_so():
    """`optserve tune` stores every answer that beats -Oz; those saving less than tuning.min_saved_bytes
    are counted apart, since builds give their units -Oz (tuning/lookup.py)."""
    from optserve.tuning.cli import _render
    from optserve.tuning.tune import TuneSummary

    summary = TuneSummary(OBJECTIVE, BUDGET, min_saved=32, units=2, oz_cost_of_units=1000)
    summary.count_unit_answer(40)
    summary.count_unit_answer(10)
    assert (summary.saved_by_units, summary.units_below_bar, summary.saved_below_bar) == (50, 1, 10)
    text = _render(summary.as_dict())
    assert "below the bar: 1 units' answers save 10 bytes" in text and "(32)" in text
    assert "below the bar" not in _render(TuneSummary(OBJECTIVE, BUDGET, units=1).as_dict())
