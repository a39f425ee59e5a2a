"""Search baselines: what each finds on a known landscape, time limits, and the real end-to-end call."""

from __future__ import annotations

import time

import numpy as np
import pytest

from optserve.kernels.jit import compile_schedule
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.policies.env import Evaluator
from optserve.policies.methods import SearchMethod
from optserve.policies.scheduler import METHODS, schedule_nest
from optserve.policies.search import SEARCHES, run_search

MATVEC = LoopNestSpec.parse("y[m] += A[m,k] * x[k]", {"m": 64, "k": 256})


def two_step_landscape(spec, schedule):
    """Stand-in GFLOPS: only an innermost loop of 16 pays, which takes `down` then `split_16` (2 steps)."""
    return 10.0 + 5.0 * (schedule.compute[-1].size == 16)


def search(method: str, limit: float = 30.0):
    return run_search(method, Evaluator(MATVEC, two_step_landscape), limit)


def test_greedy1_stops_when_no_single_action_improves():
    outcome = search("greedy1")
    assert outcome.gflops == 10.0 and outcome.actions == ()


@pytest.mark.parametrize("method", ["greedy2", "beam2dfs", "beam4dfs", "beam2bfs", "beam4bfs"])
def test_lookahead_and_beam_searches_cross_a_flat_step(method):
    outcome = search(method)
    assert outcome.gflops == 15.0
    assert outcome.state.schedule.compute[-1].size == 16
    assert len(outcome.actions) <= 10


def test_random_search_runs_until_its_time_limit_and_keeps_the_best():
    start = time.perf_counter()
    outcome = search("random", limit=0.3)
    assert 0.3 <= time.perf_counter() - start < 2.0
    assert outcome.timed_out and outcome.gflops == 15.0


def test_expired_deadline_returns_the_base_schedule():
    outcome = search("beam4bfs", limit=1e-9)
    assert outcome.timed_out and outcome.actions == ()


def test_schedule_nest_real_search_returns_a_correct_faster_or_equal_schedule():
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 64, "k": 48, "n": 64})
    result = schedule_nest(spec, "greedy1", time_limit_s=5.0, measure=True, emit_ir=True)
    assert result.gflops >= result.base_gflops > 0  # the base is among the measured candidates
    assert result.evaluations >= 1 and result.compile_ms > 0 and result.peak_gflops > 0
    assert "define void @kernel" in result.llvm_ir
    schedule = Schedule.from_text(result.schedule)
    assert [lp.index for lp in schedule.compute] == result.loop_order
    kernel = compile_schedule(spec, schedule)
    rng = np.random.default_rng(1)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = out + lhs @ rhs
    kernel(out, lhs, rhs)
    kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_schedule_nest_base_without_measuring_compiles_nothing():
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 64, "k": 64, "n": 64})
    result = schedule_nest(spec, "base", measure=False)
    assert result.gflops is None and result.evaluations == 0 and result.compile_ms is None
    assert result.schedule.splitlines()[0] == "for m in 64"


def test_schedule_nest_rejects_unknown_method_and_bad_time_limit():
    with pytest.raises(SpecError, match="unknown method"):
        schedule_nest(MATVEC, "policy-that-does-not-exist")
    with pytest.raises(SpecError, match="time limit"):
        schedule_nest(MATVEC, "greedy2", time_limit_s=0)
    searches = ("base", "greedy1", "greedy2", "beam2dfs", "beam4dfs", "beam2bfs", "beam4bfs", "random")
    assert (*searches, "policy", "policy_polish", "tiles", "policy_tiles") == METHODS


def test_every_named_method_has_a_search():
    assert list(SEARCHES) == list(SearchMethod)
