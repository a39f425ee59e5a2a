"""Raw units: the bitcode a build sent, recorded unread (no parse on the build's path) and read by
`optserve tune` later; schema 3 and its migration from 2, on both backends (a SQLite file and a real
PostgreSQL server)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import zlib

import pytest

from optserve.tuning.profile import open_profile_store
from optserve.tuning.sql_store import ZLIB_LEVEL
from optserve.tuning.store import open_store
from tests.tuning.entries import TOOLCHAIN, function_entry, hash_of, unit_entry
from tests.tuning.test_tuning_files import _execute, store_of_schema

TRIPLE = "x86_64-unknown-linux-gnu"


def raw_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_raw_unit_is_new_once_pending_until_linked_then_resolved_without_its_bitcode(store):
    bitcode = b"BC\xc0\xde" + os.urandom(200)
    raw = raw_of(bitcode)
    assert store.raw_unit(raw) is None
    assert store.record_raw(raw, bitcode, "src/a.c") is True
    assert store.record_raw(raw, bitcode, "") is False
    assert store.raw_unit(raw) == (None, None)
    (pending,) = store.pending_raw()
    assert (pending.raw_hash, pending.name, pending.bitcode, pending.size) == (raw, "src/a.c", bitcode, 204)
    assert store.stats().pending_raw_units == 1
    assert store.stats().recorded_bytes == len(zlib.compress(bitcode, ZLIB_LEVEL))
    store.link_raw(raw, hash_of("unit a"), TRIPLE)
    assert store.raw_unit(raw) == (hash_of("unit a"), TRIPLE)
    assert list(store.pending_raw()) == []
    assert (store.stats().pending_raw_units, store.stats().recorded_bytes) == (0, 0)
    assert store.record_raw(raw, bitcode, "src/a.c") is False  # known bytes: nothing to keep again


def test_a_link_of_bytes_never_recorded_raw_remembers_them_resolved(store):
    store.link_raw(raw_of(b"x"), hash_of("unit x"), "")
    assert store.raw_unit(raw_of(b"x")) == (hash_of("unit x"), "")
    assert list(store.pending_raw()) == []


def test_raw_units_share_the_recorded_bound_with_units_evicting_the_least_recent(store_url):
    blobs = {name: os.urandom(2000) for name in "abcd"}  # random: zlib keeps them about as large
    one = max(len(zlib.compress(data, ZLIB_LEVEL)) for data in blobs.values())
    with open_store(store_url, max_recorded_bytes=int(3.5 * one)) as store:
        for name in "abc":
            assert store.record_raw(raw_of(blobs[name]), blobs[name], name)
        store.record_raw(raw_of(blobs["a"]), blobs["a"], "a")  # a again: b is the least recent now
        assert store.record_raw(raw_of(blobs["d"]), blobs["d"], "d")
        assert sorted(unit.name for unit in store.pending_raw()) == ["a", "c", "d"]
        assert store.stats().recorded_bytes <= int(3.5 * one)
    with open_store(store_url, max_recorded_bytes=64) as store:
        assert store.record_raw(raw_of(b"big" * 10), os.urandom(1000), "big.c") is False


def _record_same(url: str, bitcode: bytes, results) -> None:
    with open_store(url) as store:
        results.put(store.record_raw(raw_of(bitcode), bitcode, "same.c"))


def test_concurrent_records_of_the_same_bytes_keep_one_row_and_one_says_new(store_url):
    bitcode = b"BC\xc0\xde" + os.urandom(5000)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_record_same, args=(store_url, bitcode, results)) for _ in range(6)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert sorted(results.get(timeout=5) for _ in processes) == [False] * 5 + [True]
    with open_store(store_url) as store:
        (pending,) = store.pending_raw()
        assert pending.bitcode == bitcode


def test_holds_entries_by_objective_llvm_and_vocabulary_of_any_target(store):
    assert not store.holds_entries("text_size", TOOLCHAIN.llvm_version, TOOLCHAIN.vocabulary)
    store.offer([unit_entry("u", 900)])
    assert store.holds_entries("text_size", TOOLCHAIN.llvm_version, TOOLCHAIN.vocabulary)
    assert not store.holds_entries("instruction_count", TOOLCHAIN.llvm_version, TOOLCHAIN.vocabulary)
    assert not store.holds_entries("text_size", "19.1.0", TOOLCHAIN.vocabulary)
    assert not store.holds_entries("text_size", TOOLCHAIN.llvm_version, "000000000000")


def test_a_tuned_budget_alone_counts_as_holding_entries(store):
    store.set_tuned_budget(hash_of("u"), TOOLCHAIN, 10)  # tuned, nothing beat -Oz: no entry
    assert store.holds_entries("text_size", TOOLCHAIN.llvm_version, TOOLCHAIN.vocabulary)


def test_a_profile_store_records_no_raw_unit_and_has_none_pending(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"format": "optserve-tuning-profile", "version": 1, "entries": []}')
    with open_profile_store(path) as store:
        assert store.record_raw(raw_of(b"x"), b"x", "x.c") is False
        store.link_raw(raw_of(b"x"), hash_of("x"), "")
        assert store.raw_unit(raw_of(b"x")) is None
        assert list(store.pending_raw()) == []
        assert not store.holds_entries("text_size", TOOLCHAIN.llvm_version, TOOLCHAIN.vocabulary)


def test_a_store_of_schema_2_is_migrated_to_3_in_place_keeping_its_contents(store_url):
    blob = "BYTEA" if store_url.startswith("postgresql://") else "BLOB"
    unit_blob = zlib.compress(b"define void @u() { ret void }", ZLIB_LEVEL).hex()
    blob_literal = f"'\\x{unit_blob}'::bytea" if blob == "BYTEA" else f"X'{unit_blob}'"
    store_of_schema(
        store_url,
        2,
        f"INSERT INTO units VALUES ('{hash_of('u')}', 'u.c', {blob_literal}, 29, {len(unit_blob) // 2},"
        " 1.0, 2.0, 3)",
    )
    with open_store(store_url) as store:
        assert store.lookup_functions([hash_of("f")], TOOLCHAIN) == {hash_of("f"): function_entry("f", 80)}
        (unit,) = store.recorded_units()
        assert (unit.ir, unit.times_seen) == ("define void @u() { ret void }", 3)
        assert store.record_raw(raw_of(b"bc"), b"bc", "b.c") is True
        assert store.stats().pending_raw_units == 1
    with open_store(store_url) as store:  # opens as schema 3
        assert store.raw_unit(raw_of(b"bc")) == (None, None)


def test_a_migration_from_2_that_fails_leaves_the_store_at_2(store_url):
    store_of_schema(store_url, 2, "CREATE TABLE raw_units (note TEXT)")  # in the way of the migration's table
    from optserve.tuning.store import TuningStoreError

    with pytest.raises(TuningStoreError, match="raw_units"):
        open_store(store_url)
    _execute(store_url, "DROP TABLE raw_units")
    with open_store(store_url) as store:
        assert store.lookup_functions([hash_of("f")], TOOLCHAIN) == {hash_of("f"): function_entry("f", 80)}
        assert store.raw_unit(raw_of(b"bc")) is None
