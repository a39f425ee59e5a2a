"""What opening a store answers for files and servers that are not a usable store: a random-bytes file, a
corrupt store, another application's database, a newer or an older schema, an unreachable server."""

from __future__ import annotations

import os
import sqlite3

import psycopg
import pytest

from optserve.tuning.sql_store import META_TABLE, SCHEMA_V1, SCHEMA_V2, SCHEMA_V3_ADDED
from optserve.tuning.store import TuningStoreError, default_store_path, open_store
from tests.tuning.entries import TOOLCHAIN, function_entry, hash_of


def _execute(url: str, *statements: str) -> None:
    """Run SQL on the store's database directly (as another program, or an older optserve, would)."""
    if url.startswith("postgresql://"):
        with psycopg.connect(url, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)
    else:
        connection = sqlite3.connect(url, isolation_level=None)
        for statement in statements:
            connection.execute(statement)
        connection.close()


def store_of_schema(store_url: str, version: int, *statements: str) -> None:
    """A tuning store as schema `version` (2 or 3) wrote it, with one function entry, then `statements`."""
    blob = "BYTEA" if store_url.startswith("postgresql://") else "BLOB"
    tables = SCHEMA_V2 + (SCHEMA_V3_ADDED if version >= 3 else ())
    _execute(
        store_url,
        META_TABLE,
        *(statement.format(blob=blob) for statement in tables),
        f"INSERT INTO meta VALUES ('application_id', 'optserve-tuning'), ('schema_version', '{version}')",
        f"INSERT INTO tuned VALUES ('function', '{hash_of('f')}', 'text_size', 'x86_64-unknown-linux-gnu', "
        "'20.1.8', '7e85ffbb740d', '-Oz instcombine', '[]', 80, 100, 10, 'test', 1700000000.0)",
        *statements,
    )


def test_a_file_of_random_bytes_is_refused_as_not_a_store(tmp_path):
    path = tmp_path / "tuning.sqlite3"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(
        TuningStoreError, match=r"not a tuning store \(not a SQLite database\).*move it aside"
    ):
        open_store(str(path))


def test_a_corrupt_store_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "tuning.sqlite3"
    with open_store(str(path)) as store:
        store.offer([function_entry(f"f{i}", 10) for i in range(2000)])
    data = bytearray(path.read_bytes())
    page = 4096
    data[page:] = os.urandom(len(data) - page)  # every page but the header's
    path.write_bytes(bytes(data))
    with pytest.raises(TuningStoreError, match=r"is corrupt .*move it aside"), open_store(str(path)) as store:
        store.lookup_functions([hash_of(f"f{i}") for i in range(2000)], TOOLCHAIN)


def test_another_applications_sqlite_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "places.sqlite"
    _execute(
        str(path), "CREATE TABLE bookmarks (url TEXT)", "INSERT INTO bookmarks VALUES ('https://llvm.org')"
    )
    with pytest.raises(TuningStoreError, match=r"database of another application \(tables: bookmarks\)"):
        open_store(str(path))
    connection = sqlite3.connect(path)
    assert connection.execute("SELECT name FROM sqlite_master").fetchall() == [("bookmarks",)]
    connection.close()


def test_a_store_of_a_newer_schema_is_refused_with_what_to_do(store_url):
    open_store(store_url).close()
    _execute(store_url, "UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    with pytest.raises(
        TuningStoreError, match=r"newer optserve \(tuning store schema 5; this one reads up to 4\)"
    ):
        open_store(store_url)


def test_a_meta_table_of_another_application_is_refused(store_url):
    _execute(store_url, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
             "INSERT INTO meta VALUES ('application_id', 'someone-else')")  # fmt: skip
    with pytest.raises(TuningStoreError, match=r"meta table of another application"):
        open_store(store_url)


def test_a_store_of_the_first_schema_is_migrated_in_place_keeping_its_contents(store_url):
    blob = "BYTEA" if store_url.startswith("postgresql://") else "BLOB"
    _execute(
        store_url,
        *(statement.format(blob=blob) for statement in SCHEMA_V1),
        "INSERT INTO meta VALUES ('application_id', 'optserve-tuning'), ('schema_version', '1')",
        f"INSERT INTO tuned_functions VALUES ('{hash_of('f')}', 'text_size', 'x86_64-unknown-linux-gnu', "
        "'20.1.8', '7e85ffbb740d', '-Oz instcombine', 80, 100, 10, 'test', 1700000000.0)",
        f"INSERT INTO units VALUES ('{hash_of('u')}', 'u.c', 'define void @u() {{ ret void }}', 1.0, 2.0, 3)",
    )
    with open_store(store_url) as store:
        assert store.lookup_functions([hash_of("f")], TOOLCHAIN) == {hash_of("f"): function_entry("f", 80)}
        (unit,) = store.recorded_units()
        assert (unit.ir, unit.times_seen, unit.size) == ("define void @u() { ret void }", 3, 29)
        store.offer([function_entry("g", 5)])
        store.set_tuned_budget(hash_of("u"), TOOLCHAIN, 100)
    with open_store(store_url) as store:  # opens as the current schema
        assert store.stats().function_entries == 2


def test_an_unreachable_postgresql_server_raises_a_clear_error(tmp_path):
    # no server listens on that socket directory
    url = f"postgresql://postgres:secret@/postgres?host={tmp_path}&connect_timeout=2"
    with pytest.raises(
        TuningStoreError, match=r"cannot connect to the tuning store at PostgreSQL host="
    ) as error:
        open_store(url)
    assert "secret" not in str(error.value)


def test_a_read_only_store_serves_lists_and_refuses_writes(tmp_path):
    path = str(tmp_path / "tuning.sqlite3")
    with open_store(path) as store:
        store.offer([function_entry("f", 80)])
    with open_store(path, read_only=True) as store:
        assert hash_of("f") in store.lookup_functions([hash_of("f")], TOOLCHAIN)
        with pytest.raises(TuningStoreError, match="open read-only"):
            store.offer([function_entry("f", 10)])


def test_a_read_only_open_of_a_missing_store_creates_nothing(tmp_path):
    with pytest.raises(TuningStoreError, match="no tuning store at"):
        open_store(str(tmp_path / "missing.sqlite3"), read_only=True)
    assert not (tmp_path / "missing.sqlite3").exists()


def test_the_default_store_is_in_the_tuning_dir_else_the_users_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTSERVE_TUNING_DIR", str(tmp_path / "tuning"))
    assert default_store_path() == tmp_path / "tuning" / "tuning.sqlite3"
    with open_store("") as store:
        store.offer([function_entry("f", 1)])
    assert (tmp_path / "tuning" / "tuning.sqlite3").is_file()
    monkeypatch.delenv("OPTSERVE_TUNING_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_store_path() == tmp_path / "cache" / "optserve" / "tuning.sqlite3"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".cache" / "optserve" / "tuning.sqlite3"


def test_a_sqlite_url_and_a_plain_path_open_the_same_file(tmp_path):
    path = tmp_path / "shared.sqlite3"
    with open_store(f"sqlite://{path}") as store:
        store.offer([function_entry("f", 1)])
    with open_store(str(path)) as store:
        assert hash_of("f") in store.lookup_functions([hash_of("f")], TOOLCHAIN)


def test_an_unknown_url_scheme_is_refused():
    with pytest.raises(TuningStoreError, match="unknown scheme"):
        open_store("redis://localhost:6379/0")


def test_a_postgresql_store_reads_again_after_the_server_restarts(postgres_server):
    with open_store(postgres_server.fresh_url()) as store:
        store.offer([function_entry("f", 80)])
        postgres_server.restart()
        assert hash_of("f") in store.lookup_functions([hash_of("f")], TOOLCHAIN)
        assert store.offer([function_entry("f", 70)]) == 1


def test_a_migration_that_fails_leaves_the_old_store_as_it_was(store_url):
    blob = "BYTEA" if store_url.startswith("postgresql://") else "BLOB"
    _execute(
        store_url,
        *(statement.format(blob=blob) for statement in SCHEMA_V1),
        "INSERT INTO meta VALUES ('application_id', 'optserve-tuning'), ('schema_version', '1')",
        f"INSERT INTO tuned_functions VALUES ('{hash_of('f')}', 'text_size', 'x86_64-unknown-linux-gnu', "
        "'20.1.8', '7e85ffbb740d', '-Oz instcombine', 80, 100, 10, 'test', 1700000000.0)",
        "CREATE TABLE budgets (note TEXT)",  # in the way of the migration's last table
    )
    with pytest.raises(TuningStoreError, match="budgets"):
        open_store(store_url)
    _execute(store_url, "DROP TABLE budgets")
    with open_store(store_url) as store:  # the first schema, whole: it migrates now
        assert store.lookup_functions([hash_of("f")], TOOLCHAIN) == {hash_of("f"): function_entry("f", 80)}
