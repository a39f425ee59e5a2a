"""Decisions remembered: a repeated contraction, sizes, method, threads and CPU model is answered unsearched.

A decision costs up to a second of JIT and timing; the answer depends only on the contraction, its sizes,
the method, the threads the kernel may use and the CPU it runs on, so `schedule_nest` (policies/scheduler.py)
looks it up here first and stores what it decided afterwards. A different thread count or CPU model is a
different key, so a decision made on one machine is never replayed on another.

`DecisionCache` is the seam (get, put). Two backends: `MemoryDecisionCache` (one process, bounded, least
recently used evicted: what a service replica keeps) and `SqliteDecisionCache` (one SQLite file, shared by
processes, in its own table `schedule_decisions` with its own schema version). The cache is kept out of the
tuning store's schema (tuning/sql_store.py, with its migrations and old-schema tests) on purpose: a
schedule decision is keyed and invalidated differently from a pass list, and moving it there later only
needs a third backend behind the same two methods.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from optserve.kernels.spec import LoopNestSpec

MEMORY_ENTRIES = 4096  # decisions a replica keeps (a few hundred bytes each)
SCHEMA_VERSION = "1"


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

    def __len__(self) -> int:
        return len(self._entries)


class SqliteDecisionCache:
    """Decisions in a SQLite file (WAL: several processes may read and write it at once)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            self.path, timeout=60.0, isolation_level=None, check_same_thread=False
        )
        with self._lock:
            if self.path != ":memory:":
                self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS schedule_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._connection.execute(
                "INSERT OR IGNORE INTO schedule_meta (key, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )
            (version,) = self._connection.execute(
                "SELECT value FROM schedule_meta WHERE key = 'schema_version'"
            ).fetchone()
            if version != SCHEMA_VERSION:
                self._connection.close()
                raise ValueError(
                    f"{self.path} holds schedule decisions of schema {version}, this optserve reads"
                    f" {SCHEMA_VERSION}: delete the file (decisions are found again on the next requests)"
                )
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS schedule_decisions (contraction TEXT NOT NULL,"
                " sizes TEXT NOT NULL, method TEXT NOT NULL, threads INTEGER NOT NULL, cpu TEXT NOT NULL,"
                " decision TEXT NOT NULL,"
                " PRIMARY KEY (contraction, sizes, method, threads, cpu))"
            )

    def get(self, key: DecisionKey) -> CachedDecision | None:
        with self._lock:
            row = self._connection.execute(
                "SELECT decision FROM schedule_decisions WHERE contraction = ? AND sizes = ? AND method = ?"
                " AND threads = ? AND cpu = ?",
                (key.contraction, key.sizes, key.method, key.threads, key.cpu),
            ).fetchone()
        return CachedDecision.from_json(row[0]) if row else None

    def put(self, key: DecisionKey, decision: CachedDecision) -> None:
        with self._lock:
            self._connection.execute(
                "INSERT OR REPLACE INTO schedule_decisions"
                " (contraction, sizes, method, threads, cpu, decision) VALUES (?, ?, ?, ?, ?, ?)",
                (key.contraction, key.sizes, key.method, key.threads, key.cpu, decision.to_json()),
            )

    def close(self) -> None:
        with self._lock:
            self._connection.close()


_shared: MemoryDecisionCache | None = None
_shared_lock = threading.Lock()


def shared_decision_cache() -> MemoryDecisionCache:
    """This process's cache (what a service replica passes to schedule_nest)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = MemoryDecisionCache()
        return _shared
