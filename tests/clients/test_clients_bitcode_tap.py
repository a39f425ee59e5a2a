"""The bitcode tap (clients/bitcode_tap.py): clang's one-step compile also hands optcc the unit's bitcode,
so a unit takes one clang process. Its bitcode is the IR step's byte for byte, clang's object is untouched,
a tap clang cannot load costs the build nothing, and a rebuild with a record of clang's object reads it
first. Real clang-19 and LLVM's headers, the session's real service."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from optserve.clients import bitcode_tap, elf
from tests.clients.test_clients_cold_path import optcc
from tests.clients.test_clients_never_larger import OPTCC

UNIT = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"
HAS_HEADERS = Path("/usr/lib/llvm-19/include/llvm/Passes/PassPlugin.h").exists()
needs_headers = pytest.mark.skipif(not HAS_HEADERS, reason="no LLVM 19 headers (llvm-19-dev) to build a tap")


@pytest.fixture
def unit(tmp_path, monkeypatch, optserve_target) -> Path:
    monkeypatch.delenv("OPTCC_STRATEGY")  # conftest's greedy: the tap serves the default, strategy stored
    monkeypatch.setenv("OPTCC_SERVER", optserve_target)
    (tmp_path / "unit.c").write_text(UNIT.read_text() + f"int marker_{tmp_path.name};\n")
    return tmp_path


def clang_object(folder: Path, flags: list[str], source: str = "unit.c") -> bytes:
    subprocess.run(["clang-19", "-Oz", *flags, "-c", source, "-o", "clang.o"], cwd=folder, check=True)
    return (folder / "clang.o").read_bytes()


def tapped(folder: Path, plugin: str, flags: list[str]) -> tuple[int, bytes, bytes]:
    """clang-19 -Oz FLAGS -c unit.c with the tap: (exit status, the tap's bitcode, the object)."""
    command = ["clang-19", "-Oz", *flags, "-c", str(folder / "unit.c"), "-o", str(folder / "tapped.o")]
    with open(folder / "tapped.stderr", "w+b") as errors:
        process, read_end, _ = bitcode_tap.run_tapped(command, plugin, errors)
        bitcode = bitcode_tap.read_bitcode(read_end)
        process.wait()
    return process.returncode, bitcode, (folder / "tapped.o").read_bytes()


def test_without_llvms_headers_the_tap_is_marked_unavailable_and_says_why(tmp_path, tap_folder):
    if HAS_HEADERS:  # (the session's other tests mark their stand-in compilers' taps unavailable)
        refused = [m for m in tap_folder.glob("*.unavailable") if "clang-19" in m.read_text()]
        assert list(tap_folder.glob("*.so")) and not refused
    else:
        (marker,) = tap_folder.glob("*.unavailable")
        assert "llvm-19-dev" in marker.read_text()
        assert bitcode_tap.ready(str(tap_folder), "clang-19") is None


@needs_headers
def test_the_taps_bitcode_is_the_ir_steps_and_clangs_object_is_untouched(tmp_path, tap_folder, monkeypatch):
    """With -g too: clang's assignment tracking, a pass of its own at the pipeline's start, runs after the
    tap has written the module (debug info names the working folder: both compile in the same one)."""
    monkeypatch.chdir(tmp_path)
    plugin = bitcode_tap.ready(str(tap_folder), "clang-19")
    assert plugin is not None
    (tmp_path / "unit.c").write_text(UNIT.read_text())
    for flags in (["-w"], ["-w", "-g"], ["-w", "-DCALC_EXTRA=1", "-fno-inline"]):
        status, bitcode, obj = tapped(tmp_path, plugin, flags)
        ir_step = ["clang-19", "-Oz", *flags, "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c"]
        subprocess.run([*ir_step, str(tmp_path / "unit.c"), "-o", "ir.bc"], cwd=tmp_path, check=True)
        assert status == 0 and bitcode == (tmp_path / "ir.bc").read_bytes()
        assert obj == clang_object(tmp_path, flags, str(tmp_path / "unit.c"))


@needs_headers
def test_a_unit_with_the_tap_takes_one_clang_process_and_gets_clangs_object_or_a_smaller_one(unit):
    _, [record] = optcc(unit, ["-w"], OPTCC_CACHE="0")
    assert record["tapped"] and record["outcome"] == "service" and record["store_recorded"]
    assert record["bitcode_bytes"] > 0 and record["ir_step_s"] <= record["clang_s"]
    assert (unit / "unit.o").read_bytes() == clang_object(unit, ["-w"])  # store empty: clang's object


@needs_headers
def test_a_source_error_fails_the_build_as_clangs_would(unit):
    (unit / "unit.c").write_text("int broken(void) { return 1 }\n")
    done = subprocess.run(
        [OPTCC, "-Oz", "-c", "unit.c", "-o", "unit.o"], cwd=unit, capture_output=True, text=True
    )
    clang = subprocess.run(
        ["clang-19", "-Oz", "-c", "unit.c", "-o", "c.o"], cwd=unit, capture_output=True, text=True
    )
    assert done.returncode == clang.returncode == 1 and "expected ';'" in done.stderr
    assert not (unit / "unit.o").exists()


@needs_headers
def test_a_tap_clang_cannot_load_is_marked_and_the_unit_goes_the_two_process_way(unit, tap_folder, tmp_path):
    broken = tmp_path / "broken-tap"
    broken.mkdir()
    (built,) = tap_folder.glob("*.so")  # the tap alone (the session's stand-in compilers left markers)
    plugin = Path(shutil.copy(built, broken))
    plugin.write_bytes(b"not a shared object")
    _, [record] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_TAP_DIR=str(broken))
    assert not record.get("tapped") and record["outcome"] == "service"
    assert (unit / "unit.o").read_bytes() == clang_object(unit, ["-w"])
    (marker,) = broken.glob("*.unavailable")
    assert "unable to load plugin" in marker.read_text()
    assert bitcode_tap.ready(str(broken), "clang-19") is None  # not tried again for this compiler
    _, [after] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_TAP_DIR=str(broken))
    assert not after.get("tapped")


@needs_headers
def test_a_tuned_unit_with_the_tap_gets_the_stored_lists_object_checked_against_clangs_own(unit):
    """The service compiles the tuned lists while clang's back end runs; the object kept is never larger
    than clang's object of the same command, which the tap left untouched."""
    from tests.clients.test_clients_stored import _tune_every_function

    # functions of this test's own (the store is the session's, and keyed by function: calc.c's functions
    # tuned here would be hits in the other tests' first builds)
    salt = sum(map(ord, unit.name))
    (unit / "unit.c").write_text(
        f"int mix_{salt}(int *v, int n) {{ int s = {salt}; for (int i = 0; i < n; i++) s = s * 31 + v[i];"
        " return s; }\n"
        f"int pick_{salt}(int a, int b) {{ return a > b ? a - {salt} : b + {salt}; }}\n"
    )
    _, [first] = optcc(unit, ["-w"], OPTCC_CACHE="0")
    keys = _tune_every_function(unit)
    _, [second] = optcc(unit, ["-w"], OPTCC_CACHE="0")
    assert first["tapped"] and second["tapped"] and not second.get("clang_from_record")
    assert second["store_function_hits"] == len(keys.function_hashes) and "clang_s" in second
    reference = clang_object(unit, ["-w"])
    chosen = (unit / "unit.o").read_bytes()
    assert elf.text_size(chosen) <= elf.text_size(reference)
    assert (chosen == reference) == (second["winner"] == "clang")


@needs_headers
def test_without_a_tap_a_unit_starts_its_build_in_the_background_and_goes_the_two_process_way(unit, tmp_path):
    folder = tmp_path / "new-tap"
    _, [record] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_TAP_DIR=str(folder))
    assert not record.get("tapped") and record["outcome"] == "service"
    deadline = time.monotonic() + 300  # the build: a few seconds of CPU, longer on a loaded machine
    while bitcode_tap.ready(str(folder), "clang-19") is None and time.monotonic() < deadline:
        time.sleep(1)
    assert list(folder.glob("*.so")), (folder / "build.log").read_text()
    _, [later] = optcc(unit, ["-w"], OPTCC_CACHE="0", OPTCC_TAP_DIR=str(folder))
    assert later["tapped"]


@needs_headers
def test_a_unit_waiting_for_tuning_is_rebuilt_reading_its_record_at_the_gate_until_tuned_to_nothing(unit):
    """A tapped unit the store records keeps a record of clang's object and marks its output: rebuilds wait
    at the tap's gate while the record is read and the service asked (a tuned object that beats the record
    stops clang there); once the unit is tuned and the store holds nothing for it, the mark goes and the
    tap's compile no longer waits."""
    salt = sum(map(ord, unit.name)) + 7  # functions of its own: no other test's entries for them
    (unit / "unit.c").write_text(f"int scale_{salt}(int x) {{ return x * {salt} + (x >> 3); }}\n")
    records = unit / "baselines"
    env = {"OPTCC_CACHE": "0", "OPTCC_BASELINE_DIR": str(records)}
    _, [first] = optcc(unit, ["-w"], **env)
    assert first["tapped"] and not first.get("gated") and not first["store_settled"]
    assert list(records.glob("*/*.json")) and list(records.glob("outputs/*"))
    _, [second] = optcc(unit, ["-w"], **env)
    assert second["tapped"] and second["gated"] and not second.get("clang_from_record")
    assert (unit / "unit.o").read_bytes() == clang_object(unit, ["-w"]) and "clang_s" in second
    _settle(unit)  # tuned, nothing found: settled with no lists
    _, [third] = optcc(unit, ["-w"], **env)
    assert third["gated"] and third["store_settled"] and not list(records.glob("outputs/*"))
    _, [fourth] = optcc(unit, ["-w"], **env)
    assert fourth["tapped"] and not fourth.get("gated")
    assert (unit / "unit.o").read_bytes() == clang_object(unit, ["-w"])


def _settle(unit: Path, unit_entry: bool = False) -> None:
    """What `optserve tune` writes for a unit it has tuned: settled, with a whole-unit entry (-Oz's list,
    saving a byte) or, without one, tuned to nothing."""
    import time

    from optserve.compiler.pipeline import OZ
    from optserve.tuning.lookup import toolchain_of
    from optserve.tuning.records import TunedList
    from optserve.tuning.store import open_store
    from optserve.tuning.unit_keys import unit_keys
    from tests.clients.test_clients_stored import FRONT_END

    ir = subprocess.run([*FRONT_END, "unit.c"], cwd=unit, capture_output=True, text=True, check=True).stdout
    whole, toolchain = unit_keys(ir, max_functions=200).unit_hash, toolchain_of(ir, "text_size")
    with open_store() as store:
        if unit_entry:
            store.offer([TunedList(whole, toolchain, "unit", OZ, (), 1, 2, 5, "test", time.time())])
        store.set_tuned_budget(whole, toolchain, 1)


def _waiting_with_a_record(unit: Path, flags: list[str], env: dict[str, str]) -> Path:
    """A unit of its own (no other test's store entries), built once (its record kept, its output marked),
    then tuned (a list for every function, as `optserve tune` writes them): the path of its record."""
    from tests.clients.test_clients_stored import _tune_every_function

    salt = sum(map(ord, unit.name)) + 11
    (unit / "unit.c").write_text(
        f"int mix_{salt}(int *v, int n) {{ int s = {salt}; for (int i = 0; i < n; i++) s = s * 31 + v[i];"
        " return s; }\n"
        f"int pick_{salt}(int a, int b) {{ return a > b ? a - {salt} : b + {salt}; }}\n"
    )
    _, [first] = optcc(unit, flags, **env)
    assert first["tapped"] and not first.get("gated") and not first["store_settled"]
    _tune_every_function(unit)
    (record,) = Path(env["OPTCC_BASELINE_DIR"]).glob("*/*.json")
    return record


def _record_says(record: Path, **fields) -> None:
    record.write_text(json.dumps(json.loads(record.read_text()) | fields))


@needs_headers
def test_at_the_gate_a_service_object_that_beats_the_record_stops_clang_before_its_back_end(unit):
    """The tuned object beats the record (made to say clang's code is huge): clang is told to stop at the
    gate, its back end runs on nothing, the unit gets the service's object, and clang's dependency file is
    still written (the object cache keeps the unit with its headers: a hit writes it again)."""
    env = {"OPTCC_CACHE_DIR": str(unit / "cache"), "OPTCC_BASELINE_DIR": str(unit / "baselines")}
    flags = ["-w", "-MD", "-MF", "deps.d"]
    record = _waiting_with_a_record(unit, flags, env)
    _settle(unit, unit_entry=True)  # (a settled answer is cached)
    reference = clang_object(unit, ["-w"])
    _record_says(record, text=10**9)  # any object beats it
    (unit / "deps.d").unlink()
    _, [stopped] = optcc(unit, flags, **env)
    assert stopped["tapped"] and stopped["gated"] and stopped["clang_from_record"]
    assert stopped["winner"] == "service" and "clang_s" not in stopped and stopped["store_unit_hit"]
    assert (unit / "unit.o").read_bytes() != reference and "unit.c" in (unit / "deps.d").read_text()
    (unit / "deps.d").unlink()
    _, [cached] = optcc(unit, flags, **env)
    assert cached.get("from_cache") and "unit.c" in (unit / "deps.d").read_text()


@needs_headers
def test_at_the_gate_a_record_the_service_cannot_beat_lets_clang_make_its_own_object(unit):
    env = {"OPTCC_CACHE": "0", "OPTCC_BASELINE_DIR": str(unit / "baselines")}
    record = _waiting_with_a_record(unit, ["-w"], env)
    _record_says(record, text=1)  # no object beats 1 byte of code
    _, [kept] = optcc(unit, ["-w"], **env)
    assert kept["gated"] and not kept.get("clang_from_record") and kept["winner"] == "clang"
    assert "clang_s" in kept and (unit / "unit.o").read_bytes() == clang_object(unit, ["-w"])


@needs_headers
def test_at_the_gate_a_unit_without_a_record_goes_on_at_once_and_records_clangs_object(unit):
    """Its record gone (trimmed, or another bitcode): clang goes on at once, the service is asked beside
    its back end as for any tapped unit, and the record is kept again."""
    salt = sum(map(ord, unit.name)) + 13
    (unit / "unit.c").write_text(f"int shift_{salt}(int x) {{ return (x << 2) - {salt}; }}\n")
    records = unit / "baselines"
    env = {"OPTCC_CACHE": "0", "OPTCC_BASELINE_DIR": str(records)}
    optcc(unit, ["-w"], **env)
    (record,) = records.glob("*/*.json")
    record.unlink()
    _, [again] = optcc(unit, ["-w"], **env)
    assert again["gated"] and not again.get("clang_from_record") and again["outcome"] == "service"
    assert (unit / "unit.o").read_bytes() == clang_object(unit, ["-w"])
    assert [r.name for r in records.glob("*/*.json")] == [record.name] and list(records.glob("outputs/*"))


@needs_headers
def test_told_to_stop_at_the_gate_clang_writes_no_code_but_its_dependency_file(tmp_path, tap_folder):
    """The gate itself (bitcode_tap.open_gate): the word to go on gives clang's object byte for byte, the
    word to stop an object with no code and clang's status before its end, the dependency file either way."""
    plugin = bitcode_tap.ready(str(tap_folder), "clang-19")
    (tmp_path / "unit.c").write_text(UNIT.read_text())
    reference = clang_object(tmp_path, ["-w"])
    for stop in (False, True):
        command = ["clang-19", "-Oz", "-w", "-c", str(tmp_path / "unit.c"), "-o", str(tmp_path / "tapped.o")]
        command += ["-MD", "-MF", str(tmp_path / "tapped.d")]
        with open(tmp_path / "tapped.stderr", "w+b") as errors:
            process, read_end, gate = bitcode_tap.run_tapped(command, plugin, errors, gated=True)
            assert bitcode_tap.read_bitcode(read_end)
            assert bitcode_tap.open_gate(gate, stop)
            assert not stop or bitcode_tap.stopped_status(gate) == 0  # sent on its way out
            assert process.wait() == 0
        made = (tmp_path / "tapped.o").read_bytes()
        assert (made == reference) is not stop and (elf.text_size(made) == 0) is stop
        assert "unit.c" in (tmp_path / "tapped.d").read_text()
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["unit.c", "clang.o", "tapped.o", "tapped.d", "tapped.stderr"]
        )  # no temporary object left beside it


@needs_headers
def test_a_clang_killed_at_the_gate_fails_the_unit_as_a_killed_clang_would(unit, monkeypatch):
    """Killed while it waits (the service being asked): the word finds no reader (no error, no hang), and
    the unit fails with clang's status, no object written, as a plain clang killed there fails a build."""
    import os
    import signal

    from optserve.clients import compile_modes, takeover
    from optserve.clients.command_line import decide
    from optserve.clients.settings import OptccSettings

    env = {"OPTCC_CACHE": "0", "OPTCC_BASELINE_DIR": str(unit / "baselines")}
    _waiting_with_a_record(unit, ["-w"], env)
    (unit / "unit.o").unlink()
    monkeypatch.chdir(unit)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    clangs, run_tapped, recall = [], bitcode_tap.run_tapped, compile_modes._recall

    def started(*args, **kwargs):
        process, read_end, gate = run_tapped(*args, **kwargs)
        clangs.append(process)
        return process, read_end, gate

    def kill_then_recall(*args, **kwargs):  # clang waits at the gate meanwhile
        (clang,) = clangs
        os.kill(clang.pid, signal.SIGKILL)
        clang.wait()
        return recall(*args, **kwargs)

    monkeypatch.setattr(bitcode_tap, "run_tapped", started)
    monkeypatch.setattr(compile_modes, "_recall", kill_then_recall)
    decision = decide(["-Oz", "-w", "-c", "unit.c", "-o", "unit.o"])
    settings = OptccSettings.from_environment(dict(os.environ), "clang-19")
    assert takeover.compile_unit(settings, decision.job, decision.level) == -signal.SIGKILL
    assert not (unit / "unit.o").exists()


@needs_headers
def test_the_gates_word_to_a_clang_gone_is_not_an_error(tmp_path, tap_folder):
    plugin = bitcode_tap.ready(str(tap_folder), "clang-19")
    (tmp_path / "unit.c").write_text(UNIT.read_text())
    command = ["clang-19", "-Oz", "-w", "-c", str(tmp_path / "unit.c"), "-o", str(tmp_path / "tapped.o")]
    with open(tmp_path / "tapped.stderr", "w+b") as errors:
        process, read_end, gate = bitcode_tap.run_tapped(command, plugin, errors, gated=True)
        assert bitcode_tap.read_bitcode(read_end)
        process.kill()
        assert process.wait() < 0 and not bitcode_tap.open_gate(gate, stop=True)
    assert not (tmp_path / "tapped.o").exists()
