"""Waiting for a condition of a running service, always bounded."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

Value = TypeVar("Value")


def poll(condition: Callable[[], Value], timeout_s: float, what: str, every_s: float = 0.1) -> Value:
    """The first truthy value `condition()` returns, asked every `every_s`; TimeoutError naming `what` once
    `timeout_s` has passed without one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)  # polling a condition, bounded by the deadline
    raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
