"""The one deadline type (optserve/deadline.py) of the compiler's workers, the engine and the service."""

from __future__ import annotations

import asyncio
import time

import pytest

from optserve.compiler.interface import Evaluation, Outcome
from optserve.deadline import Deadline, StoppedError


def test_within_answers_in_time_and_stops_and_cancels_the_work_once_the_deadline_passes():
    cancelled = []

    async def work(seconds: float) -> str:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.append(seconds)
            raise
        return "done"

    assert asyncio.run(Deadline.after(5.0).within(work(0.01), "quick work")) == "done"
    started = time.monotonic()
    with pytest.raises(StoppedError, match="deadline exceeded while waiting for slow work"):
        asyncio.run(Deadline.after(0.1).within(work(10.0), "slow work"))
    assert cancelled == [10.0] and time.monotonic() - started < 5
    with pytest.raises(StoppedError):  # already passed: the work is not waited for at all
        asyncio.run(Deadline.after(-1.0).within(work(10.0), "late work"))


def test_a_deadline_sent_as_wall_clock_time_is_read_back_as_the_same_instant():
    deadline = Deadline.after(7.0)
    wall = deadline.wall()
    assert wall == pytest.approx(time.time() + 7.0, abs=0.05)
    assert Deadline.from_wall(wall).at == pytest.approx(deadline.at, abs=0.01)


def test_a_share_of_a_deadline_is_that_fraction_of_the_time_left_and_nothing_once_it_passed():
    assert Deadline.after(6.0).share(0.5).remaining_s() == pytest.approx(3.0, abs=0.05)
    passed = Deadline.after(-1.0)
    assert passed.passed() and passed.share(0.5).remaining_s() <= 0
    assert Deadline.after(1.0).extended(2.0).remaining_s() == pytest.approx(3.0, abs=0.05)


def test_an_evaluation_says_its_outcome_and_only_the_pool_marks_one_cut_by_the_deadline():
    assert Evaluation(("-Oz",), 10, None, 0.1).outcome is Outcome.OK
    assert Evaluation(("-Oz",), None, "IRError: bad", 0.1).outcome is Outcome.ERROR
    # an error text that starts like the pool's own is still the compiler's error: nothing parses it
    assert Evaluation(("-Oz",), None, "deadline passed: not really", 0.1).outcome is Outcome.ERROR
    cut = Evaluation(("-Oz",), None, "cut", 0.0, outcome=Outcome.DEADLINE)
    assert cut.outcome is Outcome.DEADLINE and not cut.ok
