"""optserve.compiler.cache: keys depend on everything a result depends on; LRU eviction."""

from __future__ import annotations

import threading

from optserve.compiler.cache import ResultCache, evaluation_key, ir_digest


def test_key_depends_on_ir_pass_list_objective_and_namespace():
    ir = ir_digest("define void @f() {\n  ret void\n}\n")
    base = evaluation_key(ir, ("-Oz", "dce"), "instruction_count")
    assert base == evaluation_key(ir, ["-Oz", "dce"], "instruction_count")
    variants = {
        evaluation_key(ir_digest("define void @g() {\n  ret void\n}\n"), ("-Oz", "dce"), "instruction_count"),
        evaluation_key(ir, ("-Oz",), "instruction_count"),
        evaluation_key(ir, ("dce", "dce"), "instruction_count"),
        evaluation_key(ir, ("-Oz", "dce"), "text_size"),
        evaluation_key(ir, ("-Oz", "dce"), "instruction_count", namespace="model:v2"),
    }
    assert base not in variants and len(variants) == 5


def test_lru_keeps_the_most_recently_used_entries():
    cache: ResultCache[int] = ResultCache(max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.get("b") is None
    assert (cache.hits, cache.misses, len(cache)) == (3, 1, 2)


def test_zero_entries_disables_caching():
    cache: ResultCache[int] = ResultCache(max_entries=0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0


def test_concurrent_use_keeps_the_bound():
    cache: ResultCache[int] = ResultCache(max_entries=100)

    def fill(offset: int) -> None:
        for i in range(1000):
            cache.put(f"{offset}:{i}", i)
            cache.get(f"{offset}:{i // 2}")

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 100
