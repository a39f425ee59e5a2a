"""The tuning store's behaviour, on each backend: keep the cheaper list, accumulate compiles, look up many
hashes, isolate toolchains, record units within a bound, remember tuned budgets."""

from __future__ import annotations

import dataclasses
import threading
import zlib

from optserve.tuning.sql_store import ZLIB_LEVEL
from optserve.tuning.store import open_store
from tests.tuning.entries import TOOLCHAIN, function_entry, hash_of, unit_entry


def test_an_offer_to_an_empty_key_is_stored(store):
    assert store.offer([function_entry("f", 80)]) == 1
    assert store.lookup_functions([hash_of("f")], TOOLCHAIN)[hash_of("f")] == function_entry("f", 80)


def test_a_cheaper_list_replaces_the_stored_one(store):
    store.offer([function_entry("f", 80, pass_list=("-Oz",))])
    assert store.offer([function_entry("f", 70, pass_list=("sroa", "dce"), found_by="model")]) == 1
    stored = store.lookup_functions([hash_of("f")], TOOLCHAIN)[hash_of("f")]
    assert (stored.cost, stored.pass_list, stored.found_by) == (70, ("sroa", "dce"), "model")


def test_an_equally_cheap_list_leaves_the_stored_one(store):
    store.offer([function_entry("f", 80, pass_list=("-Oz",))])
    assert store.offer([function_entry("f", 80, pass_list=("dce",))]) == 0
    assert store.lookup_functions([hash_of("f")], TOOLCHAIN)[hash_of("f")].pass_list == ("-Oz",)


def test_a_costlier_list_leaves_the_stored_one(store):
    store.offer([function_entry("f", 80, pass_list=("-Oz",))])
    assert store.offer([function_entry("f", 90, pass_list=("dce",))]) == 0
    stored = store.lookup_functions([hash_of("f")], TOOLCHAIN)[hash_of("f")]
    assert (stored.cost, stored.pass_list) == (80, ("-Oz",))


def test_compiles_accumulate_whether_or_not_the_list_is_stored(store):
    store.offer([function_entry("f", 80, compiles=100)])
    store.offer([function_entry("f", 90, compiles=30)])  # kept out
    store.offer([function_entry("f", 70, compiles=5)])  # stored
    assert store.lookup_functions([hash_of("f")], TOOLCHAIN)[hash_of("f")].compiles == 135


def test_a_batch_offering_one_key_twice_keeps_the_cheapest_with_both_compiles(store):
    assert store.offer([function_entry("f", 80, compiles=4), function_entry("f", 60, compiles=6)]) == 1
    stored = store.lookup_functions([hash_of("f")], TOOLCHAIN)[hash_of("f")]
    assert (stored.cost, stored.compiles) == (60, 10)


def test_a_lookup_of_many_hashes_returns_exactly_the_stored_ones(store):
    store.offer([function_entry(f"f{i}", 50 + i) for i in range(0, 1200, 2)])
    wanted = [hash_of(f"f{i}") for i in range(1200)]  # half stored, more than one SQL chunk
    found = store.lookup_functions(wanted, TOOLCHAIN)
    assert set(found) == {hash_of(f"f{i}") for i in range(0, 1200, 2)}
    assert all(found[hash_of(f"f{i}")].cost == 50 + i for i in range(0, 1200, 2))


def test_another_objective_or_llvm_version_or_vocabulary_does_not_hit(store):
    store.offer([function_entry("f", 80), unit_entry("u", 900)])
    for other in (
        dataclasses.replace(TOOLCHAIN, objective="instruction_count"),
        dataclasses.replace(TOOLCHAIN, llvm_version="21.1.0"),
        dataclasses.replace(TOOLCHAIN, vocabulary="000000000000"),
        dataclasses.replace(TOOLCHAIN, target="aarch64-unknown-linux-gnu"),
    ):
        assert store.lookup_functions([hash_of("f")], other) == {}
        assert store.lookup_unit(hash_of("u"), other) is None


def test_a_unit_entry_comes_back_with_its_function_lists(store):
    store.offer([unit_entry("u", 900)])
    assert store.lookup_unit(hash_of("u"), TOOLCHAIN) == unit_entry("u", 900)


def test_a_function_entry_is_not_a_unit_entry_of_the_same_hash(store):
    store.offer([function_entry("x", 80)])
    assert store.lookup_unit(hash_of("x"), TOOLCHAIN) is None
    store.offer([unit_entry("x", 900)])
    assert store.lookup_functions([hash_of("x")], TOOLCHAIN)[hash_of("x")].cost == 80


def test_a_unit_recorded_twice_is_new_once_and_counts_both_sightings(store):
    assert store.record_unit(hash_of("u"), "define void @u() {\n  ret void\n}\n", "src/u.c") is True
    assert store.record_unit(hash_of("u"), "define void @u() {\n  ret void\n}\n", "") is False
    (unit,) = store.recorded_units()
    assert (unit.name, unit.times_seen, unit.ir) == ("src/u.c", 2, "define void @u() {\n  ret void\n}\n")
    assert unit.last_seen >= unit.first_seen


def test_recorded_units_stay_within_the_bound_evicting_the_least_recently_seen(store_url):
    irs = {name: "".join(f"; {hash_of(name + str(i))}\n" for i in range(100)) for name in "abcd"}
    one_unit = max(len(zlib.compress(ir.encode(), ZLIB_LEVEL)) for ir in irs.values())
    bound = int(3.5 * one_unit)  # three units fit, four do not
    with open_store(store_url, max_recorded_bytes=bound) as store:
        for name in "abc":
            store.record_unit(hash_of(name), irs[name], name)
        store.record_unit(hash_of("a"), irs["a"], "a")  # a seen again: b is now the least recently seen
        store.record_unit(hash_of("d"), irs["d"], "d")
        assert [unit.name for unit in store.recorded_units()] == ["d", "a", "c"]
        assert store.stats().recorded_bytes <= bound


def test_a_unit_larger_than_the_whole_bound_is_not_recorded(store_url):
    with open_store(store_url, max_recorded_bytes=64) as store:
        assert (
            store.record_unit(hash_of("big"), "".join(f"line {i}\n" for i in range(1000)), "big.c") is False
        )
        assert list(store.recorded_units()) == []


def test_a_tuned_budget_is_remembered_and_never_lowered(store):
    assert store.tuned_budget(hash_of("u"), TOOLCHAIN) == 0
    store.set_tuned_budget(hash_of("u"), TOOLCHAIN, 300)
    store.set_tuned_budget(hash_of("u"), TOOLCHAIN, 100)
    assert store.tuned_budget(hash_of("u"), TOOLCHAIN) == 300
    assert (
        store.tuned_budget(hash_of("u"), dataclasses.replace(TOOLCHAIN, objective="instruction_count")) == 0
    )


def test_entries_come_sorted_and_filter_by_toolchain(store):
    other = dataclasses.replace(TOOLCHAIN, objective="instruction_count")
    store.offer([function_entry("b", 5), unit_entry("a", 9), function_entry("a", 7, toolchain=other)])
    everything = list(store.entries())
    keys = [(e.toolchain.objective, e.kind, e.ir_hash) for e in everything]
    assert keys == sorted(keys) and len(keys) == 3
    assert [e.toolchain for e in store.entries(other)] == [other]


def test_stats_count_entries_units_savings_and_compiles(store):
    other = dataclasses.replace(TOOLCHAIN, objective="instruction_count")
    store.offer([function_entry("f", 80, compiles=3), unit_entry("u", 900, compiles=4)])
    store.offer([function_entry("g", 40, oz_cost=50, toolchain=other, compiles=5)])
    store.record_unit(hash_of("u"), "define void @u() {\n  ret void\n}\n", "u.c")
    stats = store.stats()
    assert (stats.function_entries, stats.unit_entries, stats.recorded_units) == (2, 1, 1)
    assert stats.saved_by_objective == {"text_size": 20 + 100, "instruction_count": 10}
    assert stats.compiles == 12
    assert 0 < stats.recorded_bytes < 100


def test_threads_sharing_one_store_lose_no_offer(store):
    def offer_all(thread: int) -> None:
        for i in range(40):
            store.offer([function_entry(f"f{i}", 1000 - thread * 40 - i, compiles=1)])
            store.lookup_functions([hash_of(f"f{i}")], TOOLCHAIN)

    threads = [threading.Thread(target=offer_all, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = store.lookup_functions([hash_of(f"f{i}") for i in range(40)], TOOLCHAIN)
    assert {found[hash_of(f"f{i}")].cost for i in range(40)} == {1000 - 3 * 40 - i for i in range(40)}
    assert all(entry.compiles == 4 for entry in found.values())
