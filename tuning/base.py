"""The tuning store's seam: the error every backend raises and the interface the service and `optserve tune`
call (`optserve.tuning.store` re-exports both; `open_store` picks the backend)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

from optserve.tuning.records import RawUnit, RecordedUnit, StoreStats, Toolchain, TunedList


class TuningStoreError(RuntimeError):
    """A store failure the caller can act on (a corrupt or foreign file, a newer schema, a server that cannot
    be reached, a write to a read-only store); the message says what happened and what to do."""


@runtime_checkable
class TuningStore(Protocol):
    """The best pass lists found so far, per function and per whole unit, the units recorded for tuning, and
    LoopTune's schedule decisions (policies/decision_cache.py).

    Every method may raise TuningStoreError. Implementations are safe to call from several threads, and
    several processes (and machines, for a server backend) may open the same store at once.
    """

    read_only: bool

    def lookup_functions(self, ir_hashes: Sequence[str], toolchain: Toolchain) -> dict[str, TunedList]:
        """The stored function entries among `ir_hashes` under `toolchain`, by IR hash (misses left out)."""
        ...

    def lookup_unit(self, ir_hash: str, toolchain: Toolchain) -> TunedList | None:
        """The stored whole-unit entry of `ir_hash` under `toolchain`, or None."""
        ...

    def has_function_entries(self, toolchain: Toolchain) -> bool:
        """Whether any function entry is stored under `toolchain` (none: no unit can have function hits)."""
        ...

    def offer(self, entries: Sequence[TunedList]) -> int:
        """Store each entry whose key holds none or a costlier one, in one transaction; return how many the
        store now holds (an entry identical to the stored one counts). On equal cost the stored entry stays,
        so the answer does not depend on the order of offers. Every entry's `compiles` is added to its key's
        entry either way, so the compiles spent on a key accumulate."""
        ...

    def record_unit(self, ir_hash: str, ir: str, name: str) -> bool:
        """Keep a unit's normalized IR for tuning; True if it was new. A unit seen before gets its
        `last_seen` and `times_seen` updated (and its name, when one is given). The recorded units' compressed
        bytes stay within the bound given at open, evicting the least recently seen; a unit whose compressed
        IR alone exceeds the bound is not kept (False)."""
        ...

    def seen_unit(self, ir_hash: str) -> None:
        """Note that a recorded unit was seen again, as `record_unit` does (`last_seen`, `times_seen`), for a
        unit answered from its bytes' link without reading them; a read-only store notes nothing."""
        ...

    def recorded_units(self) -> Iterator[RecordedUnit]:
        """The recorded units, most recently seen first."""
        ...

    def record_raw(self, raw_hash: str, bitcode: bytes, name: str) -> bool:
        """Keep a unit as the bitcode a client sent (`raw_hash`: SHA-256 of those bytes), unread, for
        `optserve tune` to read later; True if it was new. Bounded with the recorded units (`record_unit`'s
        rule, one bound for both); a read-only store keeps nothing (False)."""
        ...

    def raw_unit(self, raw_hash: str) -> tuple[str | None, str | None] | None:
        """(unit hash, target triple) of a raw unit once a reader linked it (`link_raw`), (None, None) while
        it waits to be read, None when the store never saw those bytes."""
        ...

    def link_raw(self, raw_hash: str, unit_hash: str, target: str) -> None:
        """Note that the bytes `raw_hash` read as unit `unit_hash` of target triple `target`, and drop their
        bitcode (the unit is recorded as IR by then); a read-only store notes nothing."""
        ...

    def pending_raw(self) -> Iterator[RawUnit]:
        """The raw units not yet read, most recently recorded first (one in memory at a time)."""
        ...

    def holds_entries(self, objective: str, llvm_version: str, vocabulary: str) -> bool:
        """Whether the store holds any function or unit entry, or any tuned unit's budget, for `objective`
        under that LLVM version and vocabulary, of any target: none means no unit can get a stored answer."""
        ...

    def tuned_budget(self, unit_hash: str, toolchain: Toolchain) -> int:
        """The compiles per function that unit `unit_hash` was tuned at under `toolchain` (0: never)."""
        ...

    def set_tuned_budget(self, unit_hash: str, toolchain: Toolchain, budget: int) -> None:
        """Note that the unit was tuned at `budget` compiles per function; a lower budget than the one
        noted leaves it, so concurrent tuners never undo each other's progress."""
        ...

    def entries(self, toolchain_filter: Toolchain | None = None) -> Iterator[TunedList]:
        """Every entry (or those of one toolchain), sorted by (objective, kind, IR hash, target, LLVM version,
        vocabulary)."""
        ...

    def lookup_decision(
        self, contraction: str, sizes: str, method: str, threads: int, cpu: str
    ) -> str | None:
        """The LoopTune schedule decision stored for that contraction (`LoopNestSpec.text()`), sizes
        (`sizes_text()`), method, threads and CPU model, as the JSON text it was recorded as; None if none."""
        ...

    def record_decision(
        self, contraction: str, sizes: str, method: str, threads: int, cpu: str, decision: str
    ) -> None:
        """Store a schedule decision's JSON text under its key, replacing what was there; a read-only store
        keeps nothing."""
        ...

    def stats(self) -> StoreStats:
        """The store's totals."""
        ...

    def close(self) -> None:
        """Release the connection; the store cannot be used afterwards."""
        ...

    def __enter__(self) -> TuningStore: ...

    def __exit__(self, *exc_info: object) -> None: ...
