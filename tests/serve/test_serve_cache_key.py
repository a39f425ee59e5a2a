"""The answer cache's key (serve/optimize/answer_key.py) and its least-recently-used eviction."""

from __future__ import annotations

import hashlib

from optserve.compiler.cache import ResultCache
from optserve.serve import schemas
from optserve.serve.optimize.answer_key import answer_key


def test_the_cache_key_covers_ir_options_and_model_version():
    request = schemas.OptimizeRequest(ir="x", strategy="priority", samples=5)
    digest = hashlib.sha256(b"x").hexdigest()
    key = answer_key(digest, request, "v1")
    assert key != answer_key(hashlib.sha256(b"y").hexdigest(), request, "v1")
    assert key != answer_key(digest, request, "v2")
    assert key != answer_key(digest, request.model_copy(update={"samples": 6}), "v1")
    assert key != answer_key(digest, request.model_copy(update={"objective": "text_size"}), "v1")
    assert key != answer_key(digest, request.model_copy(update={"return_object": True}), "v1")
    assert key == answer_key(digest, request.model_copy(update={"deadline_s": 3.0}), "v1")
    assert key == answer_key(digest, request.model_copy(update={"seed": 4}), "v1")  # not nucleus
    nucleus = request.model_copy(update={"strategy": "nucleus"})
    assert answer_key(digest, nucleus, "v1") != answer_key(
        digest, nucleus.model_copy(update={"seed": 4}), "v1"
    )


def test_the_cache_forgets_the_least_recently_used_entry():
    cache = ResultCache(2)
    cache.put("a", "A")
    cache.put("b", "B")
    assert cache.get("a") == "A"
    cache.put("c", "C")
    assert cache.get("b") is None and cache.get("a") == "A" and cache.get("c") == "C"
