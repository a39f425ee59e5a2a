"""The clock a schedule search's time budget is counted on: wall time, or the CPU time of its thread.

On a shared machine a wall-clock budget shrinks with the load: with more runnable threads than cores the
quick decision's polish budget measures only part of the cover, so what it decides depends on what else
runs. Counted in the
deciding thread's CPU time (JIT compiles and kernel timings both run on it), the budget buys about the same
candidates whatever the load, at the cost of a longer wall time when the machine is busy. Settings:
`looptune.budget_clock` ("wall", the default, or "cpu"). The clock is chosen per decision (a context
variable), so concurrent decisions on other threads keep their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}
_current: ContextVar[Callable[[], float]] = ContextVar("budget_clock", default=time.perf_counter)


def now() -> float:
    """The budget clock's reading (seconds; only differences mean anything)."""
    return _current.get()()


@contextmanager
def budget_clock(name: str) -> Iterator[None]:
    """Count deadlines on clock `name` ("wall" or "cpu") inside the block."""
    if name not in CLOCKS:
        raise ValueError(f"unknown budget clock {name!r}; choose from {', '.join(CLOCKS)}")
    token = _current.set(CLOCKS[name])
    try:
        yield
    finally:
        _current.reset(token)
