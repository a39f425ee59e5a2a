"""A content-addressed result cache: the same key always stands for the same result.

`ResultCache` is an in-memory LRU of string keys, safe to share between threads. `evaluation_key` is the key
of one candidate's evaluation: a SHA-256 digest of (IR digest, canonical pass list, objective, namespace),
the namespace naming whatever else the value depends on. The service's Optimize answers are keyed by
`optserve.serve.result_cache.answer_key` (the IR digest, the request's options and the model version).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
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


class ResultCache(Generic[Value]):
    """Least-recently-used map from cache keys to results, holding at most `max_entries`."""

    def __init__(self, max_entries: int):
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Value] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Value | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: Value) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._entries
