"""A content-addressed result cache: the same key always stands for the same result.

`ResultCache` is an in-memory LRU of string keys, safe to share between threads, bounded in entries and in
bytes (an Optimize answer may hold the optimized IR and the object code: entries alone do not bound
memory). `evaluation_key` is the key of one candidate's evaluation: a SHA-256 digest of (IR digest,
canonical pass list, objective, namespace), the namespace naming whatever else the value depends on. The
service's Optimize answers are keyed by `optserve.serve.optimize.answer_key.answer_key` (the IR digest, the
request's options and the model version).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from optserve.compiler.cost import Objective
from optserve.compiler.passes import format_pass_list

Value = TypeVar("Value")


def ir_digest(ir: str) -> str:
    """SHA-256 of the IR text (hash once per IR, then build many keys from it)."""
    return hashlib.sha256(ir.encode()).hexdigest()


def evaluation_key(
    ir_hash: str, pass_list: Sequence[str], objective: Objective | str, namespace: str = ""
) -> str:
    """The key for a result that depends on (IR, pass list, objective) and whatever `namespace` names."""
    fields = (ir_hash, format_pass_list(pass_list), str(Objective(objective)), namespace)
    return hashlib.sha256("\0".join(fields).encode()).hexdigest()


# The bytes a cache holds by default (an ingress replica's answers): a module constant, not yet a setting of
# optserve/config.py. 10,000 answers with `optimized_ir`/`object_code` near the 4 MiB IR limit: gigabytes.
DEFAULT_MAX_BYTES = 256 * 2**20
# What an entry costs beyond its strings and bytes (the key, a few candidates, timings): an estimate.
ENTRY_OVERHEAD_BYTES = 2048


def entry_bytes(value: object) -> int:
    """Roughly the bytes `value` keeps alive: a str or bytes value's length, or the lengths of the str and
    bytes fields of an object (an Optimize answer's `optimized_ir`, `object_code`), plus
    ENTRY_OVERHEAD_BYTES."""
    fields = (value,) if isinstance(value, str | bytes) else getattr(value, "__dict__", {}).values()
    return ENTRY_OVERHEAD_BYTES + sum(len(field) for field in fields if isinstance(field, str | bytes))


class ResultCache(Generic[Value]):
    """Least-recently-used map from cache keys to results, holding at most `max_entries` whose sizes
    (`size_of`, default `entry_bytes`) add up to at most `max_bytes`; a result larger than that alone is not
    kept."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
        size_of: Callable[[Value], int] = entry_bytes,
    ):
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._entries: OrderedDict[str, tuple[Value, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Value | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: str, value: Value) -> None:
        size = self._size_of(value)
        with self._lock:
            if (old := self._entries.pop(key, None)) is not None:
                self._bytes -= old[1]
            if self.max_entries == 0 or size > self.max_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted

    @property
    def bytes(self) -> int:
        """The sizes of the entries held now, added up."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._entries
