"""Retries of the Python clients (sync and async): which answers are tried again, how long to pause first,
and the rule that no try or pause outlives the call's deadline.

The clients loop themselves rather than use gRPC's own retries (a `retryPolicy` in the service config):
Ray Serve's gRPC proxy sends response headers before an error status, which commits the call for gRPC,
so gRPC never retries a refusal that comes from the service. Every optserve call may be retried: Optimize
and Schedule compute an answer and change nothing.
"""

from __future__ import annotations

import random
import time

import grpc
from pydantic import BaseModel, ConfigDict, Field

from optserve.clients.python.requests import REPLICA_DIED, replica_died  # noqa: F401 (REPLICA_DIED: tests)

PUSHBACK_KEY = "grpc-retry-pushback-ms"  # gRPC's trailing metadata for "retry after this long" (gRFC A6)


class RetryPolicy(BaseModel):
    """Tries of a call answered with one of `codes` (or INTERNAL for a replica that died with the call, which
    Ray Serve's proxy answers so: `retried`): at most `attempts` in all; the pause before the n-th
    retry is min(initial_backoff_s * multiplier**(n-1), max_backoff_s), give or take `jitter` (a fraction),
    unless the server asks for another (`grpc-retry-pushback-ms`; a negative one means: do not retry).
    `attempts=1`: no retries."""

    model_config = ConfigDict(frozen=True)

    attempts: int = Field(3, ge=1, description="tries in all, the first included")
    initial_backoff_s: float = Field(0.2, ge=0)
    max_backoff_s: float = Field(2.0, ge=0)
    multiplier: float = Field(2.0, ge=1)
    jitter: float = Field(0.2, ge=0, lt=1)
    codes: frozenset[str] = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED"})

    def pause_s(self, retry: int, err: grpc.RpcError, rng: random.Random) -> float | None:
        """Seconds to wait before retry number `retry` (1: the first) after `err`; None: do not retry."""
        if retry >= self.attempts or not self.retried(err):
            return None
        pushback_s = _pushback_s(err)
        if pushback_s is not None:
            return pushback_s if pushback_s >= 0 else None
        backoff = min(self.initial_backoff_s * self.multiplier ** (retry - 1), self.max_backoff_s)
        return backoff * rng.uniform(1 - self.jitter, 1 + self.jitter)

    def retried(self, err: grpc.RpcError) -> bool:
        """Whether an answer is tried again: its code is one of `codes`, or (with UNAVAILABLE among them) it
        says the replica that had the call died."""
        return err.code().name in self.codes or ("UNAVAILABLE" in self.codes and replica_died(err))


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(attempts=1)


def _pushback_s(err: grpc.RpcError) -> float | None:
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == PUSHBACK_KEY:
            try:
                return int(value) / 1000
            except ValueError:
                return None
    return None


class Attempts:
    """The tries of one call: the time each may take (what is left of the call's deadline) and the pause
    before the next, if one fits before the deadline."""

    _rng = random.Random()

    def __init__(self, policy: RetryPolicy, timeout_s: float):
        self.policy = policy
        self.deadline = time.monotonic() + timeout_s
        self.retries = 0

    def remaining_s(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)

    def pause_before_next(self, err: grpc.RpcError) -> float | None:
        """How long to wait before trying again after `err`; None: the call ends with `err`."""
        self.retries += 1
        pause_s = self.policy.pause_s(self.retries, err, self._rng)
        if pause_s is None or pause_s >= self.remaining_s():  # no time left to try again
            return None
        return pause_s
