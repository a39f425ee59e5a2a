"""Finished Optimize answers, keyed by everything that decides them: the IR, the options, the model version.

The key hashes the exact IR text the compiler sees (not a normalized form: attributes and metadata can change
what a pass list does), every option that shapes the candidates, and the model's content hash, so an entry
can never answer for a different IR or model. Answers cut short by a deadline are never stored. The store
is `optserve.compiler.cache.ResultCache`, keyed by `ir_digest` of the IR and `answer_key` below.
"""

from __future__ import annotations

import hashlib
import json

from optserve.engine.interface import Strategy
from optserve.serve.schemas import OptimizeRequest

# Options that do not change the ranked candidates are left out of the key.
_OPTIONS_NOT_IN_KEY = {"ir", "ir_bitcode", "deadline_s", "bypass_cache", "unit_name"}


def answer_key(ir_sha256: str, request: OptimizeRequest, model_version: str) -> str:
    options = request.model_dump(exclude=_OPTIONS_NOT_IN_KEY)
    if request.strategy != Strategy.NUCLEUS:  # sampling parameters matter only to nucleus sampling
        for name in ("temperature", "top_p", "seed"):
            options.pop(name)
    text = json.dumps([ir_sha256, model_version, options], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
