"""The search budget's clock (policies/clock.py): wall time, or the deciding thread's CPU time, which a
search waiting for a core (here: sleeping) does not spend."""

from __future__ import annotations

import time

import pydantic
import pytest

from optserve.config import LoopTuneSettings
from optserve.kernels.jit import host_target
from optserve.kernels.spec import LoopNestSpec
from optserve.policies import clock
from optserve.policies.env import Evaluator
from optserve.policies.scheduler import schedule_nest
from optserve.policies.tiles import candidates, load_cover, template_pool, unpacked

MATMUL = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 96, "k": 80, "n": 112})
WAIT_S = 0.01  # per measurement, asleep: wall time passes, CPU time does not


def test_the_cpu_clock_does_not_advance_while_the_thread_waits():
    with clock.budget_clock("cpu"):
        before = clock.now()
        time.sleep(0.05)
        assert clock.now() - before < 0.02
    with clock.budget_clock("wall"):
        before = clock.now()
        time.sleep(0.05)
        assert clock.now() - before >= 0.05
    assert clock.now() == pytest.approx(time.perf_counter(), abs=0.05)  # wall again outside the block
    with pytest.raises(ValueError, match="unknown budget clock"), clock.budget_clock("gpu"):
        pass
    with pytest.raises(pydantic.ValidationError):
        LoopTuneSettings(budget_clock="gpu")


@pytest.mark.parametrize("name", ["wall", "cpu"])
def test_a_cpu_time_budget_is_not_spent_by_waiting(monkeypatch, name):
    """Each measurement waits WAIT_S: a 0.3 s wall budget stops the tile search after ~30 of them, a 0.3 s
    CPU budget measures the whole pool and then the base."""
    import optserve.policies.scheduler as scheduler

    measured = []

    def waiting(
        spec, schedule, settings=None, compile_log=None, quick=False, deadline=None, threads=1, finalists=None
    ):
        measured.append(schedule)
        time.sleep(WAIT_S)
        compile_log.append(0.0)
        return float(len(schedule.compute))

    monkeypatch.setattr(scheduler, "measure_schedule", waiting)
    result = schedule_nest(MATMUL, "tiles", time_limit_s=0.3, settings=LoopTuneSettings(budget_clock=name))
    cover = list(load_cover())
    rest = [t for t in template_pool() if t not in cover]
    every = candidates(
        Evaluator(MATMUL, waiting), cover + unpacked(cover) + rest + unpacked(rest), host_target()
    )
    if name == "wall":
        assert result.timed_out and result.evaluations < len(every) // 2
    else:
        assert not result.timed_out and result.evaluations == len(every) + 1  # the pool, then the base
        assert result.seconds > len(every) * WAIT_S > 0.3  # the wall time it took
