"""Decisions remembered: a repeated contraction, sizes, method, threads and CPU model is answered unsearched.

A decision costs up to a second of JIT and timing; the answer depends only on the contraction, its sizes,
the method, the threads the kernel may use and the CPU it runs on, so `schedule_nest` (policies/scheduler.py)
looks it up here first and stores what it decided afterwards. A different thread count or CPU model is a
different key, so a decision made on one machine is never replayed on another.

`DecisionCache` is the seam (get, put). Three backends: `MemoryDecisionCache` (one process, bounded, least
recently used evicted: what a service replica keeps), `StoreDecisionCache` (the tuning store's
`schedule_decisions` table, tuning/sql_store.py schema 4: shared by the replicas and processes that open the
store, SQLite or PostgreSQL, and kept across restarts) and `LayeredDecisionCache`, the two in that order,
which is what the LoopTune replica uses when the service has a tuning store (serve/replicas/deployments.py):
a shape decided once, by any replica, before or after a restart, is answered without search. The store side
is typed here as `DecisionStore`, the store's two decision methods, so that the scheduler does not load the
tuning store's modules; a store error never fails a decision (`LayeredDecisionCache`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from optserve.kernels.spec import LoopNestSpec

logger = logging.getLogger(__name__)

MEMORY_ENTRIES = 4096  # decisions a replica keeps (a few hundred bytes each)


@dataclass(frozen=True)
class DecisionKey:
    """What a decision depends on."""

    contraction: str  # LoopNestSpec.text()
    sizes: str  # LoopNestSpec.sizes_text()
    method: str
    threads: int  # threads the request allowed (not the ones the kernel ended up using)
    cpu: str  # kernels/jit.py host_description(): CPU model and vector features


@dataclass(frozen=True)
class CachedDecision:
    """What is needed to answer again: the schedule and the numbers measured when it was decided."""

    schedule: str  # Schedule.text()
    actions: tuple[str, ...]
    gflops: float | None
    base_gflops: float | None
    timed_sizes: dict[str, int] | None
    threads: int  # threads the kernel runs on

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CachedDecision:
        values = json.loads(text)
        return cls(**{**values, "actions": tuple(values["actions"])})


def decision_key(spec: LoopNestSpec, method: str, threads: int, cpu: str | None = None) -> DecisionKey:
    """The key of a decision on `spec` with `method` for `threads` threads on `cpu` (None: this host's)."""
    if cpu is None:
        from optserve.kernels.jit import host_description

        cpu = host_description()
    return DecisionKey(spec.text(), spec.sizes_text(), str(method), threads, cpu)


@runtime_checkable
class DecisionCache(Protocol):
    """Decisions by key. Safe to call from several threads."""

    def get(self, key: DecisionKey) -> CachedDecision | None:
        """The decision stored under `key`, or None."""
        ...

    def put(self, key: DecisionKey, decision: CachedDecision) -> None:
        """Store `decision` under `key` (replacing what was there)."""
        ...


class MemoryDecisionCache:
    """Decisions in this process, at most `max_entries`, the least recently used evicted first."""

    def __init__(self, max_entries: int = MEMORY_ENTRIES):
        self.max_entries = max_entries
        self._entries: OrderedDict[DecisionKey, CachedDecision] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: DecisionKey) -> CachedDecision | None:
        with self._lock:
            decision = self._entries.get(key)
            if decision is not None:
                self._entries.move_to_end(key)
            return decision

    def put(self, key: DecisionKey, decision: CachedDecision) -> None:
        with self._lock:
            self._entries[key] = decision
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every decision (as a restarted process would have)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class DecisionStore(Protocol):
    """The two methods of the tuning store (tuning/base.py TuningStore) that keep decisions, as JSON text
    under the key's fields. May raise (tuning.base.TuningStoreError, or the driver's errors)."""

    def lookup_decision(
        self, contraction: str, sizes: str, method: str, threads: int, cpu: str
    ) -> str | None: ...

    def record_decision(
        self, contraction: str, sizes: str, method: str, threads: int, cpu: str, decision: str
    ) -> None: ...


def _fields(key: DecisionKey) -> tuple[str, str, str, int, str]:
    return (key.contraction, key.sizes, key.method, key.threads, key.cpu)


class StoreDecisionCache:
    """Decisions in the tuning store: shared by every process and replica that opens it, kept across
    restarts. The store's errors, and decisions whose text no longer reads, are raised to the caller."""

    def __init__(self, store: DecisionStore):
        self.store = store

    def get(self, key: DecisionKey) -> CachedDecision | None:
        text = self.store.lookup_decision(*_fields(key))
        return None if text is None else CachedDecision.from_json(text)

    def put(self, key: DecisionKey, decision: CachedDecision) -> None:
        self.store.record_decision(*_fields(key), decision.to_json())


class LayeredDecisionCache:
    """The replica's memory first, then the tuning store: a decision found in the store is kept in memory
    too, and a new one is written to both. The store is a speed-up, never a condition of an answer: an error
    reading it is a miss (the shape is searched), an error writing it leaves the decision in memory only;
    each is logged once per cache (warning), since a store that fails once tends to fail on every request."""

    def __init__(self, store: DecisionStore, memory: MemoryDecisionCache | None = None):
        self.memory = memory if memory is not None else MemoryDecisionCache()
        self.stored = StoreDecisionCache(store)
        self._warned = False
        self._lock = threading.Lock()

    def get(self, key: DecisionKey) -> CachedDecision | None:
        decision = self.memory.get(key)
        if decision is not None:
            return decision
        try:
            decision = self.stored.get(key)
        except Exception as error:  # the store's, the driver's, or a damaged decision's: any is a miss
            self._warn("read from", error)
            return None
        if decision is not None:
            self.memory.put(key, decision)
        return decision

    def put(self, key: DecisionKey, decision: CachedDecision) -> None:
        self.memory.put(key, decision)
        try:
            self.stored.put(key, decision)
        except Exception as error:  # the decision still answers from memory
            self._warn("written to", error)

    def _warn(self, what: str, error: BaseException) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        logger.warning(
            "schedule decisions are not %s the tuning store (%s: %s): decided without it (logged once)",
            what,
            type(error).__name__,
            error,
        )


_shared: MemoryDecisionCache | None = None
_shared_lock = threading.Lock()


def shared_decision_cache() -> MemoryDecisionCache:
    """This process's memory of decisions (what a service replica passes to schedule_nest without a tuning
    store, and the memory layer of its `LayeredDecisionCache` with one)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MemoryDecisionCache()
        return _shared
