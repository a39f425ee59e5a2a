"""Finished Optimize answers, keyed by everything that decides them: the IR, the options, the model version.

The key hashes the exact IR text the compiler sees (not a normalized form: attributes and metadata can change
what a pass list does), every option that shapes the candidates, and the model's content hash, so an entry
can never answer for a different IR or model. Answers cut short by a deadline are never stored.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict

from optserve.serve.schemas import OptimizeRequest, OptimizeResponse

# Options that do not change the ranked candidates are left out of the key.
_OPTIONS_NOT_IN_KEY = {"ir", "ir_bitcode", "deadline_s", "bypass_cache"}


def ir_digest(ir: str) -> str:
    return hashlib.sha256(ir.encode("utf-8")).hexdigest()


def cache_key(ir_sha256: str, request: OptimizeRequest, model_version: str) -> str:
    options = request.model_dump(exclude=_OPTIONS_NOT_IN_KEY)
    if request.strategy != "nucleus":  # sampling parameters matter only to nucleus sampling
        for name in ("temperature", "top_p", "seed"):
            options.pop(name)
    text = json.dumps([ir_sha256, model_version, options], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class ResultCache:
    """A bounded LRU map from `cache_key` to a finished response (one per ingress replica)."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._entries: OrderedDict[str, OptimizeResponse] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> OptimizeResponse | None:
        response = self._entries.get(key)
        if response is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return response

    def put(self, key: str, response: OptimizeResponse) -> None:
        if self.max_entries == 0:
            return
        self._entries[key] = response
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
