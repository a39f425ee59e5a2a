"""LoopTune's schedule decisions in the tuning store (schema 4): looked up and recorded by key on both
backends (a SQLite file and a real PostgreSQL server), counted in the stats, kept out of a read-only store,
and the table added in place to a store of schema 3 (and 1)."""

from __future__ import annotations

import pytest

from optserve.tuning.profile import open_profile_store
from optserve.tuning.sql_store import SCHEMA_V1
from optserve.tuning.store import TuningStoreError, open_store
from tests.tuning.entries import TOOLCHAIN, function_entry, hash_of
from tests.tuning.test_tuning_files import _execute, store_of_schema

KEY = ("C[m,n] += A[m,k] * B[k,n]", "k=32 m=48 n=64", "policy_tiles", 2, "znver4 (avx2 avx512f)")
DECISION = '{"schedule": "for m in 48", "threads": 2}'


def test_a_recorded_decision_is_found_under_its_key_only(store):
    assert store.lookup_decision(*KEY) is None
    store.record_decision(*KEY, DECISION)
    assert store.lookup_decision(*KEY) == DECISION
    contraction, sizes, method, threads, cpu = KEY
    assert store.lookup_decision(contraction, sizes, method, 1, cpu) is None  # another thread count
    assert store.lookup_decision(contraction, sizes, method, threads, "icelake-server (avx2)") is None
    assert store.lookup_decision(contraction, "k=32 m=48 n=65", method, threads, cpu) is None
    assert store.lookup_decision(contraction, sizes, "greedy2", threads, cpu) is None
    assert store.stats().schedule_decisions == 1


def test_a_decision_recorded_again_replaces_the_stored_one(store):
    store.record_decision(*KEY, DECISION)
    store.record_decision(*KEY, '{"schedule": "for n in 64"}')
    assert store.lookup_decision(*KEY) == '{"schedule": "for n in 64"}'
    assert store.stats().schedule_decisions == 1


def test_another_opening_of_the_store_finds_the_decision(store_url):
    with open_store(store_url) as writer:
        writer.record_decision(*KEY, DECISION)
    with open_store(store_url) as reader:  # as a restarted service, or another replica, opens it
        assert reader.lookup_decision(*KEY) == DECISION


def test_a_read_only_store_finds_decisions_and_records_none_quietly(tmp_path):
    path = str(tmp_path / "tuning.sqlite3")
    with open_store(path) as store:
        store.record_decision(*KEY, DECISION)
    with open_store(path, read_only=True) as store:
        assert store.lookup_decision(*KEY) == DECISION
        store.record_decision(*KEY[:3], 7, KEY[4], DECISION)  # no error, nothing kept
        assert store.lookup_decision(*KEY[:3], 7, KEY[4]) is None


def test_a_profile_store_holds_no_decision_and_records_none(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"format": "optserve-tuning-profile", "version": 1, "entries": []}')
    with open_profile_store(path) as store:
        store.record_decision(*KEY, DECISION)
        assert store.lookup_decision(*KEY) is None
        assert store.stats().schedule_decisions == 0


def test_a_store_of_schema_3_is_migrated_to_4_in_place_keeping_its_contents(store_url):
    store_of_schema(store_url, 3)
    with pytest.raises(TuningStoreError, match="open it writable once to migrate it to schema 4"):
        open_store(store_url, read_only=True)
    with open_store(store_url) as store:
        assert store.lookup_functions([hash_of("f")], TOOLCHAIN) == {hash_of("f"): function_entry("f", 80)}
        assert store.lookup_decision(*KEY) is None
        store.record_decision(*KEY, DECISION)
    with open_store(store_url, read_only=True) as store:  # opens as schema 4
        assert store.lookup_decision(*KEY) == DECISION
        assert store.stats().function_entries == 1


def test_a_migration_from_3_that_fails_leaves_the_store_at_3(store_url):
    store_of_schema(store_url, 3, "CREATE TABLE schedule_decisions (note TEXT)")  # in the migration's way
    with pytest.raises(TuningStoreError, match="schedule_decisions"):
        open_store(store_url)
    _execute(store_url, "DROP TABLE schedule_decisions")
    with open_store(store_url) as store:
        assert store.lookup_functions([hash_of("f")], TOOLCHAIN) == {hash_of("f"): function_entry("f", 80)}
        store.record_decision(*KEY, DECISION)
        assert store.lookup_decision(*KEY) == DECISION


def test_a_store_of_the_first_schema_migrates_through_to_hold_decisions(store_url):
    blob = "BYTEA" if store_url.startswith("postgresql://") else "BLOB"
    _execute(
        store_url,
        *(statement.format(blob=blob) for statement in SCHEMA_V1),
        "INSERT INTO meta VALUES ('application_id', 'optserve-tuning'), ('schema_version', '1')",
    )
    with open_store(store_url) as store:
        store.record_decision(*KEY, DECISION)
        assert store.lookup_decision(*KEY) == DECISION
        assert store.raw_unit(hash_of("r")) is None  # schema 3's table is there too
