"""The decision cache (policies/decision_cache.py): a repeated request is answered without search, from
memory or from the tuning store another process wrote (a real SQLite store); another thread count or CPU
model is another decision; a store that fails costs the answer its cached decision, never the answer."""

from __future__ import annotations

import logging

import pytest

from optserve.config import LoopTuneSettings
from optserve.kernels.spec import LoopNestSpec
from optserve.policies.decision_cache import (
    CachedDecision,
    LayeredDecisionCache,
    MemoryDecisionCache,
    StoreDecisionCache,
    decision_key,
)
from optserve.policies.methods import SearchMethod
from optserve.policies.scheduler import schedule_nest
from optserve.tuning.store import open_store

SPEC = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 48, "k": 32, "n": 64})
SETTINGS = LoopTuneSettings()


def _decide(cache, threads=1, emit_ir=False):
    return schedule_nest(
        SPEC,
        method=SearchMethod.POLICY_TILES,
        time_limit_s=5.0,
        settings=SETTINGS,
        threads=threads,
        cache=cache,
        emit_ir=emit_ir,
    )


def test_a_repeated_request_is_answered_without_search():
    cache = MemoryDecisionCache()
    first = _decide(cache)
    assert not first.cached and first.evaluations > 0 and len(cache) == 1
    again = _decide(cache)
    assert again.cached and again.evaluations == 0 and again.search_seconds == 0.0
    assert (again.schedule, again.actions, again.gflops) == (first.schedule, first.actions, first.gflops)
    with_ir = _decide(cache, emit_ir=True)  # the kernel is compiled for its IR, still nothing searched
    assert with_ir.cached and with_ir.evaluations == 0 and "define void @kernel" in with_ir.llvm_ir


def test_another_thread_count_or_cpu_model_misses():
    cache = MemoryDecisionCache()
    _decide(cache, threads=1)
    two = _decide(cache, threads=2)
    assert not two.cached and two.evaluations > 0 and len(cache) == 2
    here = decision_key(SPEC, SearchMethod.POLICY_TILES, 1)
    assert cache.get(here) is not None
    assert cache.get(decision_key(SPEC, SearchMethod.POLICY_TILES, 1, cpu="icelake-server (avx2)")) is None
    other_sizes = LoopNestSpec.parse(SPEC.text(), {"m": 48, "k": 32, "n": 65})
    assert cache.get(decision_key(other_sizes, SearchMethod.POLICY_TILES, 1)) is None


def _fields_of(key):
    return (key.contraction, key.sizes, key.method, key.threads, key.cpu)


@pytest.fixture
def store_path(tmp_path) -> str:
    return str(tmp_path / "tuning.sqlite3")


def test_the_tuning_store_answers_another_process_and_keeps_every_field(store_path):
    with open_store(store_path) as writer:
        first = _decide(StoreDecisionCache(writer))
    with open_store(store_path) as reader:  # as another process, or a restarted one, opens it
        again = _decide(StoreDecisionCache(reader))
        assert again.cached and again.evaluations == 0
        assert again.schedule == first.schedule and again.timed_sizes == first.timed_sizes
        assert again.gflops == first.gflops
        key = decision_key(SPEC, "x", 3, cpu="c")
        decision = CachedDecision("for m in 1", ("tile:4x1rv",), None, 2.0, {"m": 4}, 3)
        StoreDecisionCache(reader).put(key, decision)
        assert StoreDecisionCache(reader).get(key) == decision


def test_the_layered_cache_answers_from_memory_then_from_the_store_and_writes_both(store_path):
    with open_store(store_path) as store:
        memory = MemoryDecisionCache()
        first = _decide(LayeredDecisionCache(store, memory))
        assert not first.cached and len(memory) == 1 and store.stats().schedule_decisions == 1
        memory.clear()  # the replica restarted: its memory is empty, the store is not
        again = _decide(LayeredDecisionCache(store, memory))
        assert again.cached and again.evaluations == 0 and again.schedule == first.schedule
        assert len(memory) == 1  # the store's decision is kept in memory for the next request
        key = decision_key(SPEC, SearchMethod.POLICY_TILES, 1)
        store.record_decision(*_fields_of(key), CachedDecision("x", (), 1.0, 1.0, None, 1).to_json())
        assert LayeredDecisionCache(store, memory).get(key) == memory.get(key)  # memory first


def test_a_store_that_fails_costs_the_cached_decision_never_the_answer(store_path, caplog):
    store = open_store(store_path)
    store.close()  # every call now fails
    cache = LayeredDecisionCache(store)
    with caplog.at_level(logging.WARNING, logger="optserve.policies.decision_cache"):
        first = _decide(cache)  # the lookup fails: searched; the record fails: kept in memory
        again = _decide(cache)
        _decide(cache, threads=2)
    assert not first.cached and first.evaluations > 0
    assert again.cached and again.schedule == first.schedule
    warnings = [r for r in caplog.records if "not read from the tuning store" in r.getMessage()
                or "not written to the tuning store" in r.getMessage()]  # fmt: skip
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


def test_a_damaged_stored_decision_is_decided_again_and_replaced(store_path):
    key = decision_key(SPEC, SearchMethod.POLICY_TILES, 1)
    with open_store(store_path) as store:
        store.record_decision(*_fields_of(key), "{not json")
        result = _decide(LayeredDecisionCache(store))
        assert not result.cached and result.evaluations > 0
        assert CachedDecision.from_json(store.lookup_decision(*_fields_of(key))).schedule == result.schedule


def test_a_read_only_store_answers_its_decisions_and_takes_no_new_ones(store_path):
    with open_store(store_path) as store:
        first = _decide(StoreDecisionCache(store))
    with open_store(store_path, read_only=True) as store:
        memory = MemoryDecisionCache()
        assert _decide(LayeredDecisionCache(store, memory)).schedule == first.schedule
        two = _decide(LayeredDecisionCache(store, memory), threads=2)
        assert not two.cached and len(memory) == 2 and store.stats().schedule_decisions == 1


def test_a_cached_schedule_that_no_longer_checks_is_decided_again():
    cache = MemoryDecisionCache()
    key = decision_key(SPEC, SearchMethod.POLICY_TILES, 1)
    cache.put(key, CachedDecision("for m in 7\ncompute\nwrite-back", (), 1.0, 1.0, None, 1))
    result = _decide(cache)
    assert not result.cached and result.evaluations > 0
    assert cache.get(key).schedule == result.schedule


def test_a_decision_made_unmeasured_does_not_answer_a_request_to_measure():
    """`measure=False` decides without timing (no GFLOPS); a later request that asks for GFLOPS is decided
    again, timed, and that decision replaces the unmeasured one."""
    cache = MemoryDecisionCache()
    quick = schedule_nest(
        SPEC, method="base", time_limit_s=5.0, settings=SETTINGS, threads=1, cache=cache, measure=False
    )
    assert quick.gflops is None
    measured = schedule_nest(SPEC, method="base", time_limit_s=5.0, settings=SETTINGS, threads=1, cache=cache)
    assert not measured.cached and measured.gflops and measured.gflops > 0
    again = schedule_nest(SPEC, method="base", time_limit_s=5.0, settings=SETTINGS, threads=1, cache=cache)
    assert again.cached and again.gflops == measured.gflops
