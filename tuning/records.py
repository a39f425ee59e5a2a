"""What the tuning store holds: tuned pass lists, the toolchain they are valid for, recorded units, totals.

A pass list is only worth reusing under the toolchain it was measured with: the same objective, target,
LLVM version and pass vocabulary (`Toolchain`); all four are part of every entry's key, so a store shared by
machines of several toolchains never serves one's lists to another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["function", "unit"]
KINDS: tuple[Kind, ...] = ("function", "unit")


@dataclass(frozen=True)
class Toolchain:
    """What a stored list is valid for: the objective it minimizes, the target triple, LLVM's version and the
    pass vocabulary's version (`optserve.tuning.keys.current_toolchain` builds the one of this install)."""

    objective: str
    target: str
    llvm_version: str
    vocabulary: str


@dataclass(frozen=True)
class TunedList:
    """The best pass lists found so far for one function or one whole unit, and what finding them cost.

    kind "function": `pass_list` is the function's list and `function_lists` is empty. kind "unit":
    `function_lists` holds (function name, list) pairs sorted by name, and `pass_list` is the list of the
    unit's remaining code (the default). `cost` and `oz_cost` are measured under `toolchain.objective`;
    `compiles` counts every compile spent on this key, by every tuner that offered a list for it.
    """

    ir_hash: str
    toolchain: Toolchain
    kind: Kind
    pass_list: tuple[str, ...]
    function_lists: tuple[tuple[str, tuple[str, ...]], ...]
    cost: int
    oz_cost: int
    compiles: int
    found_by: str
    found_at: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be 'function' or 'unit', got {self.kind!r}")
        if self.kind == "function" and self.function_lists:
            raise ValueError(f"a function entry has no function lists ({self.ir_hash})")
        names = [name for name, _ in self.function_lists]
        if names != sorted(names) or len(set(names)) != len(names):
            raise ValueError(f"function lists are sorted by name, each name once ({self.ir_hash})")

    @property
    def saved(self) -> int:
        """What the list saves against -Oz (negative when it is worse)."""
        return self.oz_cost - self.cost


@dataclass(frozen=True)
class RecordedUnit:
    """A unit's IR text as the service received it (normalized), kept for `optserve tune`.

    `name` is informative (the source path the client gave, may be empty); `size` is the IR's length in
    UTF-8 bytes; `first_seen`/`last_seen` are Unix times, `times_seen` counts the requests that sent it.
    """

    ir_hash: str
    name: str
    ir: str
    size: int
    first_seen: float
    last_seen: float
    times_seen: int


@dataclass(frozen=True)
class RawUnit:
    """A unit recorded as the bitcode a client sent, not yet read by LLVM (`optserve tune` reads it).

    `raw_hash` is the SHA-256 (hex) of the exact bytes; `size` their length; `recorded_at` a Unix time (the
    last time a client sent them)."""

    raw_hash: str
    name: str
    bitcode: bytes
    size: int
    recorded_at: float


@dataclass(frozen=True)
class StoreStats:
    """Totals of a store. `recorded_bytes` counts the recorded units' compressed IR and the pending raw
    units' compressed bitcode (what the `max_recorded_bytes` bound limits); `saved_by_objective` sums
    `TunedList.saved` over every entry of each objective, function and unit entries alike; `compiles` sums
    the compiles spent on every entry; `pending_raw_units` counts the raw units no tuner has read yet;
    `schedule_decisions` the LoopTune schedule decisions kept (policies/decision_cache.py)."""

    recorded_units: int
    recorded_bytes: int
    function_entries: int
    unit_entries: int
    saved_by_objective: dict[str, int]
    compiles: int
    pending_raw_units: int = 0
    schedule_decisions: int = 0
