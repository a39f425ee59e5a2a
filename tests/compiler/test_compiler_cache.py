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


def test_entries_are_evicted_least_recently_used_first_to_stay_within_the_byte_bound():
    cache: ResultCache[bytes] = ResultCache(max_entries=100, max_bytes=3000, size_of=len)
    cache.put("a", b"x" * 1000)
    cache.put("b", b"x" * 1000)
    cache.put("c", b"x" * 1000)
    assert cache.get("a") is not None  # b is now the least recently used
    cache.put("d", b"x" * 1500)
    assert "b" not in cache and "c" not in cache and {"a", "d"} <= {k for k in "abcd" if k in cache}
    assert cache.bytes == 2500
    cache.put("a", b"x" * 10)  # replacing an entry counts its new size only
    assert cache.bytes == 1510 and len(cache) == 2


def test_a_result_larger_than_the_byte_bound_is_not_kept():
    cache: ResultCache[bytes] = ResultCache(max_entries=100, max_bytes=1000, size_of=len)
    cache.put("small", b"x" * 10)
    cache.put("huge", b"x" * 1001)
    assert "huge" not in cache and cache.get("small") == b"x" * 10 and cache.bytes == 10


def test_optimize_answers_count_their_optimized_ir_and_object_code():
    """The default size of an entry: an Optimize answer holding its outputs weighs what they weigh, so
    answers with outputs push others out long before the entry limit."""
    from optserve.compiler.cache import ENTRY_OVERHEAD_BYTES
    from optserve.serve import schemas

    def answer(ir: str | None, obj: bytes | None) -> schemas.OptimizeResponse:
        oz = schemas.Candidate(pipeline="default<Oz>", passes=["-Oz"], cost=3, source="oz")
        return schemas.OptimizeResponse(
            ir_sha256="0" * 64, objective="text_size", input_cost=4, oz_cost=3, candidates=[oz], best=oz,
            improvement_over_oz_pct=0.0, timings=schemas.Timings(), model_id="m", model_version="v",
            optimized_ir=ir, object_code=obj,
        )  # fmt: skip

    cache: ResultCache[schemas.OptimizeResponse] = ResultCache(max_entries=1000, max_bytes=4 * 2**20)
    cache.put("plain", answer(None, None))
    assert cache.bytes < 2 * ENTRY_OVERHEAD_BYTES
    for n in range(3):
        cache.put(f"outputs{n}", answer("x" * 2**20, b"\0" * 2**19))  # 1.5 MiB each
    assert cache.bytes <= 4 * 2**20 and len(cache) == 2
    assert "plain" not in cache and "outputs0" not in cache and "outputs2" in cache
