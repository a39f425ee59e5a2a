"""A request's deadline (one type for the compiler, the engine and the service) and the error of work it
stopped.

A `Deadline` is an instant of this process's monotonic clock, so the time left does not jump when the wall
clock is set. That instant means nothing in another process, maybe on another host: where a request crosses
one (a Ray deployment handle, the gRPC proxy's metadata) its deadline travels as wall-clock time (Unix
seconds), absolute, so the time it waits in a queue on the way counts against it (a relative budget would
restart there). `wall()` and `Deadline.from_wall` are the only conversions, made at those edges
(serve/replicas/handles.py and deployments.py, serve/edges/grpc_methods.py). Hosts of one cluster keep their
clocks in step (NTP): a skew of a few milliseconds moves the stop by as much.

Work the deadline stopped raises `StoppedError` (`within`, a compiler worker's job); a compile the deadline
cut is an `Evaluation` with outcome `Outcome.DEADLINE` (compiler/pipeline.py), since a batch keeps the
candidates measured in time. This module sits at the package's top so that every layer may import it: the
compiler (bottom layer) stops its workers at a deadline, and the engine and the service pass one down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# The service's deadline budgets, in one table. The deadlines themselves and their limits are settings
# (optserve/config.py: serve.default_deadline_s and max_deadline_s for Optimize,
# looptune.search_time_limit_s for Schedule).
# Of a gRPC call's time, kept for the answer (serve/edges/grpc_methods.py `work_deadline`): the Optimizer
# waits up to BACKEND_GRACE_S past its deadline for a backend, then the answer goes back through the proxy,
# slow on a loaded machine (half a second is too little there: the client's deadline passes first). A
# short call keeps half of what is left instead.
ANSWER_MARGIN_S = 1.0
# How long past the request's deadline the Optimizer waits for a backend that did not stop on its own.
BACKEND_GRACE_S = 0.25
# Of the time left before a Schedule's deadline, the search's share (serve/replicas/deployments.py): a timing
# started near the end of its limit may run 20% past it (policies/scheduler.py), the chosen schedule's compile
# (and IR) follows, and a replica's first Schedule also measures the core's peak GFLOPS (tenths of a second).
SEARCH_SHARE = 2 / 3
# The search time of a Schedule that names none (`time_limit_s` 0), at most looptune.search_time_limit_s.
SCHEDULE_TIME_LIMIT_S = 10.0
# How long the ingress waits for the engine's metadata (serve/replicas/handles.py): a running engine answers
# at once, so no answer in this time means no replica (starting or being replaced): UNAVAILABLE.
ENGINE_ANSWER_TIMEOUT_S = 5.0
# grpc.aio reports "no deadline" as a remaining time this large, or none at all.
NO_DEADLINE_S = 1e8


class StoppedError(RuntimeError):
    """Work stopped before it was done: its deadline came (the message says so), its caller gave up, or a
    compiler worker's time limit ended the job."""


@dataclass(frozen=True)
class Deadline:
    """When work must be done, as a `time.monotonic()` instant of this process (`at`)."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The deadline `seconds` from now."""
        return cls(time.monotonic() + seconds)

    @classmethod
    def from_wall(cls, wall_time: float) -> Deadline:
        """A deadline another process sent as wall-clock time (Unix seconds), on this process's clock."""
        return cls(time.monotonic() + (wall_time - time.time()))

    def wall(self) -> float:
        """This deadline as wall-clock time (Unix seconds), for another process."""
        return time.time() + (self.at - time.monotonic())

    def remaining_s(self) -> float:
        """Seconds left; zero or less once it passed."""
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def share(self, fraction: float) -> Deadline:
        """The deadline of a part of the work that may take `fraction` of the time left (none once passed)."""
        now = time.monotonic()
        return Deadline(now + fraction * max(self.at - now, 0.0))

    def extended(self, seconds: float) -> Deadline:
        """This deadline `seconds` later: how long to wait for a backend that should stop at it itself."""
        return Deadline(self.at + seconds)

    async def within(self, awaitable: Awaitable[T], what: str) -> T:
        """`awaitable`'s result, or StoppedError (and it cancelled) once this deadline passes."""
        try:
            return await asyncio.wait_for(awaitable, timeout=max(self.remaining_s(), 0.0))
        except TimeoutError:
            raise exceeded(what) from None


def exceeded(what: str) -> StoppedError:
    """The error of work the deadline stopped while `what` was awaited."""
    return StoppedError(f"deadline exceeded while waiting for {what}")


def as_wall_time(deadline: Deadline | None) -> float | None:
    """`deadline` as wall-clock time for another process (None stays None: no deadline)."""
    return None if deadline is None else deadline.wall()


def from_wall_time(wall_time: float | None) -> Deadline | None:
    """A wall-clock deadline from another process as a Deadline of this one (None stays None)."""
    return None if wall_time is None else Deadline.from_wall(wall_time)
