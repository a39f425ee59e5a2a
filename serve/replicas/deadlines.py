"""A request's deadline as it crosses from the ingress to a backend replica (another process, maybe host).

The Optimize flow keeps its deadline as a `time.monotonic()` instant, which means nothing in another process
on another host. Across a deployment handle it travels as wall-clock time (`time.time()`), absolute, so the
time the call waits in the replica's queue counts against it (a relative budget would restart there); the
replica turns it back into its own monotonic clock. Hosts of one cluster keep their clocks in step (NTP):
a skew of a few milliseconds moves the stop by as much.
"""

from __future__ import annotations

import time


def as_wall_time(deadline: float | None) -> float | None:
    """The monotonic `deadline` of this process as wall-clock time (None stays None: no deadline)."""
    return None if deadline is None else time.time() + (deadline - time.monotonic())


def as_monotonic(wall_deadline: float | None) -> float | None:
    """A wall-clock deadline from another process as a monotonic instant of this one."""
    return None if wall_deadline is None else time.monotonic() + (wall_deadline - time.time())
