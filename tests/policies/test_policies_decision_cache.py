"""The decision cache (policies/decision_cache.py): a repeated request is answered without search, from
memory or from a SQLite file another process wrote; another thread count or CPU model is another decision."""

from __future__ import annotations

from optserve.config import LoopTuneSettings
from optserve.kernels.spec import LoopNestSpec
from optserve.policies.decision_cache import (
    CachedDecision,
    MemoryDecisionCache,
    SqliteDecisionCache,
    decision_key,
)
from optserve.policies.methods import SearchMethod
from optserve.policies.scheduler import schedule_nest

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


def test_a_sqlite_cache_answers_another_process_and_keeps_its_fields(tmp_path):
    path = tmp_path / "schedules.sqlite3"
    writer = SqliteDecisionCache(path)
    first = _decide(writer)
    writer.close()
    reader = SqliteDecisionCache(path)  # as another process would open it
    again = _decide(reader)
    assert again.cached and again.schedule == first.schedule and again.timed_sizes == first.timed_sizes
    key = decision_key(SPEC, "x", 3, cpu="c")
    decision = CachedDecision("for m in 1", ("tile:4x1rv",), None, 2.0, None, 3)
    reader.put(key, decision)
    assert reader.get(key) == decision
    reader.close()


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
