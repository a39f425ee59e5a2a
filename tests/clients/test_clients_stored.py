"""optcc's default, the tuning store's fast path: every unit asks the service (strategy `stored`, through its
bitcode: one front end), is recorded there for `optserve tune`, gets the store's lists once tuned, and is
counted in `optcc --stats`. Real clang-19, the session's real service and its real tuning store."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from optserve.clients import elf
from optserve.clients.settings import OptccSettings
from optserve.compiler.pipeline import OZ
from optserve.tuning.lookup import toolchain_of
from optserve.tuning.records import TunedList
from optserve.tuning.store import open_store
from optserve.tuning.unit_keys import unit_keys
from tests.clients.test_clients_cold_path import optcc
from tests.clients.test_clients_never_larger import OPTCC

UNIT = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"
FRONT_END = ["clang-19", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-w", "-o", "-"]


@pytest.fixture
def unit(tmp_path, monkeypatch, optserve_target) -> Path:
    monkeypatch.delenv("OPTCC_STRATEGY")  # conftest's greedy: this file tests the default
    monkeypatch.setenv("OPTCC_SERVER", optserve_target)
    # a unit of its own per test (the store is the session's): one more global makes it new
    (tmp_path / "unit.c").write_text(UNIT.read_text() + f"int marker_{tmp_path.name};\n")
    return tmp_path


@pytest.fixture
def two_processes(monkeypatch):
    """Records of clang's objects serve the two-process way (the IR step, then clang's back end), which
    units take without the bitcode tap; with it, clang's object is made beside the call and compared as
    it is (test_clients_bitcode_tap.py)."""
    monkeypatch.setenv("OPTCC_TAP", "0")


def stats(folder: Path) -> str:
    done = subprocess.run([OPTCC, "--stats"], cwd=folder, capture_output=True, text=True, check=True)
    return done.stdout


def counter(text: str, label: str) -> int:
    (line,) = [line for line in text.splitlines() if line.strip().startswith(label)]
    return int(line.split()[-1])


def test_the_default_strategy_is_the_tuning_stores():
    assert OptccSettings.from_environment({}, "clang-19").strategy == "stored"


def test_the_records_of_clangs_objects_live_beside_the_object_cache_unless_told_otherwise():
    def folder(**env: str) -> str | None:
        return OptccSettings.from_environment(env, "clang-19").baselines_dir

    assert folder(OPTCC_CACHE_DIR="/c") == "/c/baselines"
    assert folder(OPTCC_CACHE_DIR="/c", OPTCC_BASELINE_DIR="/b") == "/b"
    assert folder(OPTCC_CACHE_DIR="/c", OPTCC_BASELINE_DIR="0") is None
    assert folder(OPTCC_CACHE="0") is None


def test_a_unit_is_recorded_then_served_its_tuned_lists_never_larger_than_clangs(unit):
    _, [first] = optcc(unit, ["-w"], OPTCC_CACHE="0")
    assert first["outcome"] == "service" and first["strategy"] == "stored"
    assert (
        first["store_recorded"]
        and first["store_function_hits"] == 0
        and first["best_source"] in ("oz", "client_baseline")
    )
    clang = subprocess.run(["clang-19", "-Oz", "-w", "-c", "unit.c", "-o", "clang.o"], cwd=unit, check=True)
    assert clang.returncode == 0

    with open_store() as store:  # the service's store (conftest: this session's OPTSERVE_TUNING_DIR)
        # recorded as IR, or (a store holding nothing for text_size yet) as its bitcode, unread
        recorded = {u.ir_hash for u in store.recorded_units()}
        pending = [u.name for u in store.pending_raw()]
    keys = _tune_every_function(unit)  # what `optserve tune` would write: a list for every function
    assert keys.unit_hash in recorded or any(name.endswith("unit.c") for name in pending)
    _, [second] = optcc(unit, ["-w"], OPTCC_CACHE="0")
    assert not second["store_recorded"] and second["store_function_hits"] == len(keys.function_hashes)
    chosen, reference = (unit / "unit.o").read_bytes(), (unit / "clang.o").read_bytes()
    assert elf.text_size(chosen) <= elf.text_size(reference)


def test_stats_count_units_and_store_hits_and_zero_stats_resets_them(unit):
    subprocess.run([OPTCC, "--zero-stats"], cwd=unit, check=True, capture_output=True)
    optcc(unit, ["-w"], OPTCC_CACHE="0")
    text = stats(unit)
    assert counter(text, "units taken over") == 1 and counter(text, "asked the service") == 1
    assert "stats file: " + str(Path(os.environ["OPTCC_CACHE_DIR"]) / "stats.json") in text
    subprocess.run([OPTCC, "--zero-stats"], cwd=unit, check=True, capture_output=True)
    assert counter(stats(unit), "units taken over") == 0


def test_optccs_object_cache_keeps_a_stored_answer_only_once_its_unit_was_tuned(unit):
    """Else a rebuild after `optserve tune` would get the first build's objects from optcc's cache."""
    _, [first] = optcc(unit, ["-w"])
    _, [again] = optcc(unit, ["-w"])
    assert not first["store_settled"] and not again.get("from_cache")  # asked again: tuning may come
    ir = subprocess.run([*FRONT_END, "unit.c"], cwd=unit, capture_output=True, text=True, check=True).stdout
    with open_store() as store:
        store.set_tuned_budget(unit_keys(ir, max_functions=200).unit_hash, toolchain_of(ir, "text_size"), 1)
    _, [tuned] = optcc(unit, ["-w"])
    _, [cached] = optcc(unit, ["-w"])
    assert tuned["store_settled"] and cached.get("from_cache")


def _tune_every_function(unit: Path):
    """What `optserve tune` would write for the unit: a list that beats -Oz's size for each function; the
    unit's keys."""
    ir = subprocess.run([*FRONT_END, "unit.c"], cwd=unit, capture_output=True, text=True, check=True).stdout
    keys = unit_keys(ir, max_functions=200)
    toolchain = toolchain_of(ir, "text_size")
    entries = [
        TunedList(h, toolchain, "function", ("instcombine", "simplifycfg"), (), 1, 2, 5, "test", time.time())
        for h in sorted(set(keys.function_hashes.values()))
    ]
    with open_store() as store:
        store.offer(entries)
    return keys


def test_a_rebuild_skips_clangs_back_end_when_the_record_of_its_object_is_beaten(unit, two_processes):
    """The first build keeps the record of clang's object of the unit's bitcode (baseline_memo.py); after
    tuning, the rebuild asks the service first, told clang's size, and writes the service's smaller object
    without running clang's back end; it is never larger than clang's own object."""
    records = unit / "baselines"
    _, [first] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_BASELINE_DIR=str(records))
    assert not first.get("clang_from_record") and list(records.glob("*/*.json"))
    _tune_every_function(unit)
    _, [second] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_BASELINE_DIR=str(records))
    subprocess.run(["clang-19", "-Oz", "-w", "-c", "unit.c", "-o", "clang.o"], cwd=unit, check=True)
    chosen, reference = (unit / "unit.o").read_bytes(), (unit / "clang.o").read_bytes()
    if elf.text_size(chosen) < elf.text_size(reference):  # the tuned lists beat clang: no back end ran
        assert second["clang_from_record"] and second["winner"] == "service" and "clang_s" not in second
    else:
        assert not second.get("clang_from_record") and second["winner"] == "clang"
    assert elf.text_size(chosen) <= elf.text_size(reference)


def test_the_record_decides_whether_clangs_back_end_runs_and_an_unreadable_one_is_a_miss(unit, two_processes):
    """A record the service's object beats skips clang's back end; one it cannot beat runs it (clang's
    object, byte for byte); a record that cannot be read is a miss."""
    records = unit / "baselines"
    optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_BASELINE_DIR=str(records))
    _tune_every_function(unit)
    (record,) = records.glob("*/*.json")
    subprocess.run(["clang-19", "-Oz", "-w", "-c", "unit.c", "-o", "clang.o"], cwd=unit, check=True)
    reference = (unit / "clang.o").read_bytes()

    original = json.loads(record.read_text())
    record.write_text(json.dumps(original | {"text": 10**9}))  # any object beats it: the back end is skipped
    subprocess.run([OPTCC, "--zero-stats"], cwd=unit, check=True, capture_output=True)
    _, [skipped] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_BASELINE_DIR=str(records))
    assert skipped["clang_from_record"] and skipped["winner"] == "service" and "clang_s" not in skipped
    assert skipped["store_function_hits"] > 0 and (unit / "unit.o").read_bytes() != reference
    assert counter(stats(unit), "of which beat the record of clang's object") == 1  # optcc --stats

    tampered = original | {"text": 1}  # no object beats 1 byte of code
    record.write_text(json.dumps(tampered))
    _, [beaten] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_BASELINE_DIR=str(records))
    assert not beaten.get("clang_from_record") and beaten["winner"] == "clang" and "clang_s" in beaten
    assert (unit / "unit.o").read_bytes() == reference

    record.write_text("{not json")
    _, [unread] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_BASELINE_DIR=str(records))
    assert not unread.get("clang_from_record") and "clang_s" in unread
    assert elf.text_size((unit / "unit.o").read_bytes()) <= elf.text_size(reference)


def test_an_object_chosen_over_the_record_is_cached_with_the_users_dependency_file(unit, two_processes):
    """Clang's back end did not run, but the front end wrote the -MD file: the object cache keeps the unit
    (once tuned: settled) with its headers, and a hit writes the dependency file again."""
    env = {"OPTCC_CACHE_DIR": str(unit / "cache"), "OPTCC_BASELINE_DIR": str(unit / "baselines")}
    flags = ["-w", "-MD", "-MF", "deps.d"]
    optcc(unit, flags, **env)
    ir = subprocess.run([*FRONT_END, "unit.c"], cwd=unit, capture_output=True, text=True, check=True).stdout
    whole, toolchain = unit_keys(ir, max_functions=200).unit_hash, toolchain_of(ir, "text_size")
    with open_store() as store:  # tuned, with a whole-unit entry: a settled answer with an object
        store.offer([TunedList(whole, toolchain, "unit", OZ, (), 1, 2, 5, "test", time.time())])
        store.set_tuned_budget(whole, toolchain, 1)
    (record,) = (unit / "baselines").glob("*/*.json")
    record.write_text(json.dumps(json.loads(record.read_text()) | {"text": 10**9}))  # the service wins
    _, [skipped] = optcc(unit, flags, **env)
    assert skipped.get("clang_from_record") and skipped["store_unit_hit"] and skipped["store_settled"]
    (unit / "deps.d").unlink()
    _, [cached] = optcc(unit, flags, **env)
    assert cached.get("from_cache") and "unit.c" in (unit / "deps.d").read_text()
