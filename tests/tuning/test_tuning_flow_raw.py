"""Record now, read later: strategy stored with bitcode from a client that compares (optcc's request) is
answered without reading the bitcode while the store can hold nothing for it, and `optserve tune` reads it
later (Ray-free Optimizer, real compiler pool, real SQLite store; the tuner on a real local Ray)."""

from __future__ import annotations

import asyncio
import base64
import subprocess
from pathlib import Path

import pytest

from optserve.compiler.cache import ResultCache
from optserve.compiler.function_lists import FunctionLists, apply_function_lists
from optserve.compiler.ir import compile_input, parse_ir, read_ir
from optserve.compiler.pipeline import evaluate
from optserve.config import Settings
from optserve.serve import schemas
from optserve.tuning.keys import llvm_version, vocabulary_version
from optserve.tuning.lookup import raw_hash, toolchain_of, unread_answer
from optserve.tuning.records import TunedList
from optserve.tuning.store import open_store
from optserve.tuning.tune import search_plan, tune
from optserve.tuning.unit_keys import read_unit, unit_hash, unit_keys
from tests.serve.flow_helpers import ScriptedGenerator
from tests.tuning.entries import function_entry

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"
SETTINGS = Settings.model_validate({"engine": {"coreset_lists_with_model": 0, "unit_function_lists": 0}})
CORESET = (("-Os",), ("-O2",), ("instcombine", "simplifycfg"), ("-Oz", "instcombine"))


@pytest.fixture(scope="module")
def bitcode(tmp_path_factory) -> bytes:
    """calc.c as optcc sends it: clang-19's front end at -Oz, no LLVM passes, bitcode."""
    out = tmp_path_factory.mktemp("bc") / "calc.bc"
    command = ["clang-19", "-g", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-w"]
    subprocess.run([*command, str(PROGRAM), "-o", str(out)], check=True)
    return out.read_bytes()


@pytest.fixture(scope="module")
def pool():
    from optserve.compiler.workers import CompilerPool

    with CompilerPool(processes=2, timeout_s=20) as compiler_pool:
        yield compiler_pool


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "tuning.sqlite3")) as opened:
        yield opened


class _Watching:
    """The real pool, noting every job: the functions run in a worker, and the candidates compiled."""

    def __init__(self, pool):
        self.pool, self.ran, self.compiled = pool, [], []

    async def evaluate_async(self, ir, jobs, *args, **kwargs):
        self.compiled += list(jobs)
        return await self.pool.evaluate_async(ir, jobs, *args, **kwargs)

    async def run_async(self, function, *args, **kwargs):
        self.ran.append(function.__name__)
        return await self.pool.run_async(function, *args, **kwargs)


def as_optcc_asks(module: bytes | str, **fields) -> schemas.OptimizeRequest:
    source = {"ir_bitcode": base64.b64encode(module)} if isinstance(module, bytes) else {"ir": module}
    options = {"objective": "text_size", "strategy": "stored", "return_object": True,
               "skip_input_cost": True, "client_compares": True, "unit_name": "calc.c"}  # fmt: skip
    return schemas.OptimizeRequest(**source, **(options | fields))


def run(compiler, store, request, settings: Settings = SETTINGS):
    from optserve.serve.optimize.optimizer import Optimizer

    generator = ScriptedGenerator([("-Oz",)])
    optimizer = Optimizer(settings, generator, compiler, ResultCache(10), generator.metadata, store)

    async def answered():
        response = await optimizer.optimize(request)
        await optimizer.notes_written()  # the store's notes, written off the answer's path
        return response

    return asyncio.run(answered())


def test_an_empty_store_records_the_bitcode_unread_and_answers_with_the_clients_object(pool, store, bitcode):
    watching = _Watching(pool)
    first = run(watching, store, as_optcc_asks(bitcode))
    assert "read_unit" not in watching.ran and watching.compiled == []  # no read, no compile
    assert first.timings.compile_s == 0 and first.timings.validate_s == 0
    assert [c.source for c in first.candidates] == ["client_baseline"] and first.oz_skipped
    assert first.tuning.recorded and not first.tuning.settled and first.ir_sha256 == raw_hash(bitcode)
    (pending,) = store.pending_raw()
    assert (pending.raw_hash, pending.name, pending.bitcode) == (raw_hash(bitcode), "calc.c", bitcode)
    second = run(watching, store, as_optcc_asks(bitcode))
    assert not second.tuning.recorded and "read_unit" not in watching.ran
    assert list(store.recorded_units()) == []  # read by the tuner, not by the build


def test_the_answer_unread_is_the_answer_read_of_a_unit_with_nothing_stored(pool, store, bitcode, tmp_path):
    unread = run(pool, store, as_optcc_asks(bitcode))
    with open_store(str(tmp_path / "other.sqlite3")) as other:
        read = run(pool, other, as_optcc_asks(parse_ir(bitcode, 2**24)))
    fields = ("candidates", "best", "input_cost", "oz_cost", "oz_skipped", "object_code", "tuning")
    assert {f: getattr(unread, f) for f in fields} == {f: getattr(read, f) for f in fields}


def test_a_probe_is_answered_unread_and_not_recorded(pool, store, bitcode):
    response = run(pool, store, as_optcc_asks(bitcode, unit_name="conftest.c"))
    assert not response.tuning.recorded and list(store.pending_raw()) == []


def test_a_store_holding_entries_reads_the_unit_and_links_its_bytes(pool, store, bitcode):
    toolchain = toolchain_of(parse_ir(bitcode, 2**24), "text_size")
    store.offer([function_entry("of another unit", 80, toolchain=toolchain)])
    watching = _Watching(pool)
    response = run(watching, store, as_optcc_asks(bitcode))
    assert "read_unit" in watching.ran and response.tuning.recorded
    keys = unit_keys(parse_ir(bitcode, 2**24), 200)
    assert store.raw_unit(raw_hash(bitcode)) == (keys.unit_hash, toolchain.target)
    assert [u.ir_hash for u in store.recorded_units()] == [keys.unit_hash]


def test_the_intake_reads_the_unit_and_its_key_as_the_keys_were_made(bitcode):
    """`read_unit` (the service's intake with a store) gives `parse_ir`'s text and the unit's key, and the
    split given that key gives the keys it gives alone: the store's keys are the same either way."""
    ir = parse_ir(bitcode, 2**24)
    assert read_unit(bitcode, 2**24) == (ir, unit_hash(ir))
    assert unit_keys(ir, 200, None, unit_hash(ir)) == unit_keys(ir, 200)
    assert len(unit_keys(ir, 200).function_hashes) > 1


def test_a_linked_unit_tuned_without_an_entry_is_answered_unread_and_settled(pool, store, bitcode):
    ir = parse_ir(bitcode, 2**24)
    toolchain = toolchain_of(ir, "text_size")
    store.offer([function_entry("of another unit", 80, toolchain=toolchain)])
    store.set_tuned_budget(unit_keys(ir, 200).unit_hash, toolchain, 10)  # nothing beat its -Oz
    run(pool, store, as_optcc_asks(bitcode))  # read once: linked
    (before,) = store.recorded_units()
    watching = _Watching(pool)
    response = run(watching, store, as_optcc_asks(bitcode))
    # nothing read, nothing compiled (the LLVM version, asked once per Optimizer, is all a worker gave)
    assert watching.ran == ["current_toolchain"] and watching.compiled == []
    assert response.tuning.settled and [c.source for c in response.candidates] == ["client_baseline"]
    (after,) = store.recorded_units()  # seen again without a read: not the first to be evicted
    assert after.times_seen == before.times_seen + 1 and after.last_seen > before.last_seen


def test_a_unit_recorded_unread_and_then_read_is_new_once(pool, store, bitcode):
    first = run(pool, store, as_optcc_asks(bitcode))
    toolchain = toolchain_of(parse_ir(bitcode, 2**24), "text_size")
    store.offer([function_entry("of another unit", 80, toolchain=toolchain)])  # now the unit is read
    second = run(pool, store, as_optcc_asks(bitcode))
    assert first.tuning.recorded and not second.tuning.recorded
    assert list(store.pending_raw()) == [] and len(list(store.recorded_units())) == 1


def test_text_ir_and_requests_without_client_compares_are_read_as_before(pool, store, bitcode):
    watching = _Watching(pool)
    run(watching, store, as_optcc_asks(bitcode, client_compares=False))
    assert "read_unit" in watching.ran and list(store.pending_raw()) == []


def test_tune_reads_the_raw_unit_and_the_next_identical_request_gets_the_stored_answer(
    pool, store, bitcode, local_ray
):
    run(pool, store, as_optcc_asks(bitcode))
    store.record_raw(raw_hash(b"BC\xc0\xde not bitcode"), b"BC\xc0\xde not bitcode", "broken.c")
    summary = tune(store, search_plan("text_size", 10, CORESET), max_functions=200)
    assert (summary.raw_units_read, summary.raw_units_unreadable, summary.units) == (1, 1, 1)
    assert any("broken.c" in failure and "bitcode" in failure for failure in summary.failures)
    ir = parse_ir(bitcode, 2**24)
    assert store.raw_unit(raw_hash(bitcode)) == (unit_keys(ir, 200).unit_hash, toolchain_of(ir, "").target)
    assert [u.name for u in store.pending_raw()] == ["broken.c"]  # reported, kept for a later LLVM
    watching = _Watching(pool)
    again = run(watching, store, as_optcc_asks(bitcode))
    read = run(pool, store, as_optcc_asks(ir))
    assert again.tuning.settled and not again.tuning.recorded
    assert (again.candidates, again.tuning) == (read.candidates, read.tuning)


def test_a_linked_unit_whose_entry_saves_less_than_the_bar_is_answered_unread(pool, store, bitcode):
    """`tuning.min_saved_bytes`: the unit's own entry saves 5 bytes, under a bar of 6 it is not worth its
    compile, so the bytes need no reading (as a unit tuned to nothing)."""
    ir = parse_ir(bitcode, 2**24)
    toolchain = toolchain_of(ir, "text_size")
    keys = unit_keys(ir, 200)
    lists = tuple((name, ("instcombine",)) for name in sorted(keys.function_hashes))
    store.offer([TunedList(keys.unit_hash, toolchain, "unit", ("-Oz",), lists, 95, 100, 9, "test", 1.0)])
    store.set_tuned_budget(keys.unit_hash, toolchain, 10)
    bar = SETTINGS.tuning.model_copy(update={"min_saved_bytes": 6})
    settings = SETTINGS.model_copy(update={"tuning": bar})
    run(pool, store, as_optcc_asks(bitcode), settings)  # read once: linked
    watching = _Watching(pool)
    response = run(watching, store, as_optcc_asks(bitcode), settings)
    assert watching.ran == ["current_toolchain"] and watching.compiled == []
    assert response.tuning.settled and [c.source for c in response.candidates] == ["client_baseline"]


# A rebuild's tuned unit, compiled as it was sent: bytes a reader linked to a unit whose own entry is worth
# its compile get that entry's object with no intake read and no key computed, read once by the compile.


def _tuned(store, bitcode: bytes) -> FunctionLists:
    """A unit entry for the unit of `bitcode` (a list per function, saving 50 bytes of 100), its lists."""
    ir = parse_ir(bitcode, 2**24)
    toolchain = toolchain_of(ir, "text_size")
    keys = unit_keys(ir, 200)
    lists = tuple((name, ("sroa", "instcombine")) for name in sorted(keys.function_hashes))
    store.offer([TunedList(keys.unit_hash, toolchain, "unit", ("-Oz",), lists, 50, 100, 9, "test", 1.0)])
    store.set_tuned_budget(keys.unit_hash, toolchain, 10)
    return FunctionLists.of(dict(lists))


def test_a_compile_given_the_bytes_makes_the_object_the_text_makes(bitcode):
    ir, module = read_ir(bitcode, 2**24)
    assert ir == parse_ir(bitcode, 2**24) and str(module) == str(compile_input(ir))
    module.close()
    lists = FunctionLists.of({"main": ("sroa",)})
    for run_job, job in ((apply_function_lists, lists), (evaluate, ("-O2", "sink"))):
        as_text = run_job(ir, job, "text_size", want_object=True)
        as_sent = run_job(bitcode, job, "text_size", want_object=True)
        assert as_sent.error is None and as_sent.object_code == as_text.object_code


def test_a_linked_unit_with_a_worthy_entry_is_compiled_as_sent_without_an_intake_read(pool, store, bitcode):
    job = _tuned(store, bitcode)
    first = run(pool, store, as_optcc_asks(bitcode))  # read: the bytes are linked to the unit
    found = unread_answer(store, raw_hash(bitcode), "text_size", *_host(), 0)
    assert found.stored is not None and found.stored.job == job and found.stored.unit_hit
    watching = _Watching(pool)
    again = run(watching, store, as_optcc_asks(bitcode))
    assert watching.ran == ["current_toolchain"] and watching.compiled == [job]  # no read_unit, no split
    assert again.object_code and again.object_code == first.object_code
    assert [c.source for c in again.candidates] == [c.source for c in first.candidates]
    assert [c.cost for c in again.candidates] == [c.cost for c in first.candidates]
    assert again.tuning.unit_hit and again.tuning.settled and not again.tuning.recorded
    assert again.ir_sha256 == raw_hash(bitcode) and again.timings.validate_s == 0


def test_a_client_baseline_smaller_than_the_entry_keeps_the_clients_object(pool, store, bitcode):
    _tuned(store, bitcode)
    run(pool, store, as_optcc_asks(bitcode))
    response = run(pool, store, as_optcc_asks(bitcode, baseline_cost=1))
    assert [c.source for c in response.candidates][0] == "client_baseline" and not response.object_code


def _host() -> tuple[str, str]:
    return llvm_version(), vocabulary_version()
