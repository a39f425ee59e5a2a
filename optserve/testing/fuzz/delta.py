"""Delta debugging's reduction step, to minimize fuzzers' inputs (lines of text, bitcode entries, bytes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Unit = TypeVar("Unit")


def drop_chunks(
    units: Sequence[Unit],
    keeps: Callable[[list[Unit]], bool],
    keep_first: int = 0,
    stop: Callable[[], bool] = lambda: False,
) -> list[Unit]:
    """A sublist of `units` that `keeps` still accepts, found by leaving out chunks of units: first halves,
    then chunks half as long each round, down to single units, retrying a length while a round removed
    something. The first `keep_first` units are never left out. Ends once `stop()` (a time budget) says so,
    else after at most about 2 n log n tries."""
    units = list(units)
    chunk = max((len(units) - keep_first) // 2, 1)
    while chunk >= 1 and not stop():
        at, changed = keep_first, False
        while at < len(units) and not stop():
            candidate = units[:at] + units[at + chunk :]
            if len(candidate) > keep_first and keeps(candidate):
                units, changed = candidate, True
            else:
                at += chunk
        if not changed:
            chunk //= 2
    return units
