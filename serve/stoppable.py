"""Ingress work in a thread that ends with its request: at the request's deadline, or when it is cancelled.

asyncio stops waiting for a thread but cannot stop the thread: a split of a unit of hundreds of functions
abandoned at the deadline ran on for seconds in the ingress, beside the next requests. The splits
(compiler/ir.py `split_functions`, compiler/function_lists.py `split_unit`) ask a `stop()` between
functions instead, and this module answers it: true once the deadline has come or the awaiting task was
cancelled (the answer went back without it). Compiles need no such thing: the compiler pool kills them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_thread(work: Callable[..., T], *args, deadline: float | None) -> T:
    """`work(*args, stop=stop)` in a thread; `stop()` turns true at the monotonic `deadline` (None: never)
    and once this call is cancelled, so the thread ends soon after either (`work` raises then)."""
    given_up = threading.Event()

    def stop() -> bool:
        return given_up.is_set() or (deadline is not None and time.monotonic() >= deadline)

    try:
        return await asyncio.to_thread(work, *args, stop=stop)
    except asyncio.CancelledError:
        given_up.set()
        raise
