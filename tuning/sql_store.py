"""The tuning store over SQL: one schema, one set of statements, two backends (SQLite and PostgreSQL).

`SqlTuningStore` holds everything the backends share: the schema and its versions, the conditional upsert
that keeps the cheaper list and accumulates compiles, the bounded unit recording, and the conversion between
rows and records. A backend (`sqlite_store`, `postgres_store`) supplies the connection, its transactions, the
batch forms of the upsert and lookup, and the translation of its driver's errors into TuningStoreError.

Schema version 4 (the current one):

    meta     (key, value)                 application_id = 'optserve-tuning', schema_version = '4'
    tuned    (kind, ir_hash, objective, target, llvm_version, vocabulary)  ->  pass_list, function_lists,
             cost, oz_cost, compiles, found_by, found_at    (pass lists in text form, function_lists JSON)
    units    (ir_hash) -> name, ir (zlib-compressed), size, stored_bytes, first_seen, last_seen, times_seen
    budgets  (unit_hash, objective, target, llvm_version, vocabulary) -> budget
    raw_units (raw_hash) -> name, bitcode (zlib-compressed; NULL once read), size, stored_bytes,
             recorded_at, unit_hash and target (NULL until a reader linked them)
    schedule_decisions (contraction, sizes, method, threads, cpu) -> decision (JSON text), decided_at

A raw unit is the bitcode a build sent, kept unread so that recording costs the build no parse (`optserve
tune` reads it, records it as a unit and links the two). A schedule decision is LoopTune's answer for one
contraction over its sizes, with one method, for a kernel on a number of threads, on one CPU model
(policies/decision_cache.py writes and reads its JSON; the store only keeps the text): a repeated shape is
answered without search, by any replica and after a restart. Version 3 had no decisions and version 2 no raw
units either; opening them adds the tables in place. Version 1, the first layout, held function entries
only (`tuned_functions`, without kind or function lists), recorded units uncompressed, and no budgets;
opening it migrates it through versions 2 and 3 to 4 in place, in one transaction.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from optserve.tuning.base import TuningStoreError
from optserve.tuning.records import RawUnit, RecordedUnit, StoreStats, Toolchain, TunedList

APPLICATION_ID = "optserve-tuning"
SCHEMA_VERSION = 4
ZLIB_LEVEL = 6

KEY_COLUMNS = ("kind", "ir_hash", "objective", "target", "llvm_version", "vocabulary")
VALUE_COLUMNS = ("pass_list", "function_lists", "cost", "oz_cost", "compiles", "found_by", "found_at")
COLUMNS = KEY_COLUMNS + VALUE_COLUMNS
_SELECT = ", ".join(COLUMNS)
_TOOLCHAIN_WHERE = "objective = ? AND target = ? AND llvm_version = ? AND vocabulary = ?"

# {blob} is the backend's binary type. The integer and real type names mean the same in both databases.
SCHEMA_V2 = (
    "CREATE TABLE tuned (kind TEXT NOT NULL, ir_hash TEXT NOT NULL, objective TEXT NOT NULL,"
    " target TEXT NOT NULL, llvm_version TEXT NOT NULL, vocabulary TEXT NOT NULL,"
    " pass_list TEXT NOT NULL, function_lists TEXT NOT NULL, cost BIGINT NOT NULL, oz_cost BIGINT NOT NULL,"
    " compiles BIGINT NOT NULL, found_by TEXT NOT NULL, found_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (kind, ir_hash, objective, target, llvm_version, vocabulary))",
    "CREATE TABLE units (ir_hash TEXT PRIMARY KEY, name TEXT NOT NULL, ir {blob} NOT NULL,"
    " size BIGINT NOT NULL, stored_bytes BIGINT NOT NULL, first_seen DOUBLE PRECISION NOT NULL,"
    " last_seen DOUBLE PRECISION NOT NULL, times_seen BIGINT NOT NULL)",
    "CREATE INDEX units_by_last_seen ON units (last_seen)",
    "CREATE TABLE budgets (unit_hash TEXT NOT NULL, objective TEXT NOT NULL, target TEXT NOT NULL,"
    " llvm_version TEXT NOT NULL, vocabulary TEXT NOT NULL, budget BIGINT NOT NULL,"
    " PRIMARY KEY (unit_hash, objective, target, llvm_version, vocabulary))",
)
# Added by version 3.
SCHEMA_V3_ADDED = (
    "CREATE TABLE raw_units (raw_hash TEXT PRIMARY KEY, name TEXT NOT NULL, bitcode {blob},"
    " size BIGINT NOT NULL, stored_bytes BIGINT NOT NULL, recorded_at DOUBLE PRECISION NOT NULL,"
    " unit_hash TEXT, target TEXT)",
)
# Added by version 4.
SCHEMA_V4_ADDED = (
    "CREATE TABLE schedule_decisions (contraction TEXT NOT NULL, sizes TEXT NOT NULL, method TEXT NOT NULL,"
    " threads BIGINT NOT NULL, cpu TEXT NOT NULL, decision TEXT NOT NULL,"
    " decided_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (contraction, sizes, method, threads, cpu))",
)
META_TABLE = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

# The first layout, kept to migrate from (and for the tests to build an old store).
SCHEMA_V1 = (
    META_TABLE,
    "CREATE TABLE tuned_functions (ir_hash TEXT NOT NULL, objective TEXT NOT NULL, target TEXT NOT NULL,"
    " llvm_version TEXT NOT NULL, vocabulary TEXT NOT NULL, pass_list TEXT NOT NULL, cost BIGINT NOT NULL,"
    " oz_cost BIGINT NOT NULL, compiles BIGINT NOT NULL, found_by TEXT NOT NULL,"
    " found_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (ir_hash, objective, target, llvm_version, vocabulary))",
    "CREATE TABLE units (ir_hash TEXT PRIMARY KEY, name TEXT NOT NULL, ir TEXT NOT NULL,"
    " first_seen DOUBLE PRECISION NOT NULL, last_seen DOUBLE PRECISION NOT NULL, times_seen BIGINT NOT NULL)",
)
OUR_TABLES = frozenset(
    {"meta", "tuned", "units", "budgets", "tuned_functions", "raw_units", "schedule_decisions"}
)

# Keep the cheaper list: every value column takes the offered value only when the offered cost is strictly
# lower (on a tie the stored entry stays), and compiles add up either way, in the same statement. (A
# `WHERE excluded.cost < tuned.cost` on the update would skip the row and lose the offered compiles.)
_CHEAPER = "excluded.cost < tuned.cost"
UPSERT_TAIL = (
    " ON CONFLICT (kind, ir_hash, objective, target, llvm_version, vocabulary) DO UPDATE SET "
    + ", ".join(
        f"{column} = CASE WHEN {_CHEAPER} THEN excluded.{column} ELSE tuned.{column} END"
        for column in ("pass_list", "function_lists", "cost", "oz_cost", "found_by", "found_at")
    )
    + ", compiles = tuned.compiles + excluded.compiles"
    + f" RETURNING {_SELECT}"
)

Row = tuple[Any, ...]
Method = TypeVar("Method", bound=Callable[..., Any])


def guarded(method: Method) -> Method:
    """Turn the backend driver's errors raised in `method` into TuningStoreError (the backend words it)."""

    @functools.wraps(method)
    def wrapper(self: SqlTuningStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except TuningStoreError:
            raise
        except self.driver_errors as error:
            raise self.translate_error(error) from error

    return wrapper  # type: ignore[return-value]


def guarded_read(method: Method) -> Method:
    """`guarded`, and a read that met a connection lost since the last call (a restarted server) is tried
    once more on a new connection. Writes are not retried: whether a lost commit happened is unknown, and
    compiles would be counted twice."""

    @functools.wraps(method)
    def wrapper(self: SqlTuningStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except self.driver_errors as error:
            if not self.lost_connection(error):
                raise self.translate_error(error) from error
        return guarded(method)(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def entry_row(entry: TunedList) -> Row:
    """A TunedList as the row of `tuned` (COLUMNS order)."""
    toolchain = entry.toolchain
    function_lists = json.dumps([[name, " ".join(passes)] for name, passes in entry.function_lists])
    return (
        entry.kind,
        entry.ir_hash,
        toolchain.objective,
        toolchain.target,
        toolchain.llvm_version,
        toolchain.vocabulary,
        " ".join(entry.pass_list),
        function_lists,
        int(entry.cost),
        int(entry.oz_cost),
        int(entry.compiles),
        entry.found_by,
        float(entry.found_at),
    )


def row_entry(row: Row) -> TunedList:
    """The TunedList of a `tuned` row (COLUMNS order)."""
    kind, ir_hash, objective, target, llvm_version, vocabulary, pass_list, function_lists = row[:8]
    cost, oz_cost, compiles, found_by, found_at = row[8:]
    return TunedList(
        ir_hash=ir_hash,
        toolchain=Toolchain(objective, target, llvm_version, vocabulary),
        kind=kind,
        pass_list=tuple(pass_list.split()),
        function_lists=_function_lists(function_lists),
        cost=int(cost),
        oz_cost=int(oz_cost),
        compiles=int(compiles),
        found_by=found_by,
        found_at=float(found_at),
    )


def _function_lists(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if text == "[]":  # every function entry: skip the parser on the lookup path
        return ()
    return tuple((name, tuple(passes.split())) for name, passes in json.loads(text))


def _kept_fields(row: Row) -> Row:
    """What an upsert keeps or replaces as a whole: everything but the key and the accumulated compiles."""
    return (row[6], row[7], int(row[8]), int(row[9]), row[11], float(row[12]))


def cheapest_per_key(entries: Sequence[TunedList]) -> list[Row]:
    """One row per key, sorted by key: the cheapest entry (the first of equals), carrying the compiles of all
    the batch's entries of that key. A batch can then be written in one statement, and concurrent writers
    lock keys in one order (no deadlock)."""
    best: dict[Row, list[Any]] = {}
    for entry in entries:
        row = entry_row(entry)
        key = row[:6]
        held = best.get(key)
        if held is None:
            best[key] = list(row)
        elif row[8] < held[8]:
            best[key] = list(row[:10]) + [held[10] + row[10]] + list(row[11:])
        else:
            held[10] += row[10]
    return [tuple(best[key]) for key in sorted(best)]


class SqlTuningStore:
    """The shared implementation of TuningStore; a backend subclass provides the hooks below."""

    driver_errors: tuple[type[BaseException], ...] = ()
    placeholder = "?"
    blob_type = "BLOB"
    # Whether a database holding other applications' tables may also hold the store (a server's database:
    # yes; a SQLite file: no, it belongs to whoever created it).
    shares_database = False

    def __init__(self, where: str, *, max_recorded_bytes: int, read_only: bool):
        if max_recorded_bytes <= 0:
            raise ValueError(f"max_recorded_bytes must be positive, got {max_recorded_bytes}")
        self.where = where  # for messages: a path, or a server and database (never a password)
        self.max_recorded_bytes = max_recorded_bytes
        self.read_only = read_only
        self._lock = threading.RLock()

    # -- backend hooks

    def read(self) -> AbstractContextManager[Any]:
        """A cursor for reads, holding the store's lock (each statement sees committed data)."""
        raise NotImplementedError

    def write(self) -> AbstractContextManager[Any]:
        """A write transaction (holding the store's lock and the database's write lock), yielding a cursor."""
        raise NotImplementedError

    def translate_error(self, error: BaseException) -> TuningStoreError:
        raise NotImplementedError

    def table_names(self, cursor: Any) -> set[str]:
        raise NotImplementedError

    def lost_connection(self, error: BaseException) -> bool:
        """Whether `error` means the connection was lost (the next call may reconnect)."""
        return False

    def free_table_names(self, cursor: Any, table: str) -> None:
        """After `table` was renamed, free the names its indexes had (the new table's are the same)."""

    def lock_for_schema(self, cursor: Any) -> None:
        """Serialize schema creation and migration between processes (SQLite's write lock already does)."""

    def lock_for_units(self, cursor: Any) -> None:
        """Serialize unit recording and eviction between processes (SQLite's write lock already does)."""

    def upsert_rows(self, cursor: Any, rows: list[Row]) -> list[Row]:
        """Run the keep-the-cheaper upsert for `rows` (distinct keys, sorted); return the rows as stored."""
        raise NotImplementedError

    def function_rows(self, cursor: Any, ir_hashes: list[str], toolchain: Toolchain) -> list[Row]:
        raise NotImplementedError

    def close_connection(self) -> None:
        raise NotImplementedError

    # -- helpers

    def sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def execute(self, cursor: Any, statement: str, parameters: Sequence[Any] = ()) -> Any:
        cursor.execute(self.sql(statement), tuple(parameters))
        return cursor

    def _check_writable(self) -> None:
        if self.read_only:
            raise TuningStoreError(
                f"the tuning store {self.where} is open read-only (a tuning profile, or read_only=True): "
                "it serves its lists but takes no writes; open a writable store to tune or record"
            )

    # -- schema

    @guarded
    def prepare_schema(self) -> None:
        """Check that the database is a tuning store of a version this code reads; create the schema in an
        empty database; migrate an older version in place, in one transaction."""
        transaction = self.read if self.read_only else self.write
        with transaction() as cursor:
            self.lock_for_schema(cursor)
            tables = self.table_names(cursor)
            if "meta" not in tables:
                if tables and not self.shares_database:
                    raise TuningStoreError(
                        f"{self.where} is a database of another application (tables: "
                        f"{', '.join(sorted(tables)[:5])}), not a tuning store; point tuning.store_url at "
                        "another path (the default is tuning.sqlite3 in the user's cache directory)"
                    )
                if tables & OUR_TABLES:
                    raise TuningStoreError(
                        f"{self.where} holds tables named as the tuning store's but no meta table: another "
                        "application's, or a store damaged by hand; use another database or schema"
                    )
                if self.read_only:
                    raise TuningStoreError(f"{self.where} holds no tuning store (read-only: none is created)")
                self._create(cursor)
                return
            meta = dict(self.execute(cursor, "SELECT key, value FROM meta").fetchall())
            if meta.get("application_id") != APPLICATION_ID:
                raise TuningStoreError(
                    f"{self.where} has a meta table of another application "
                    f"(application_id {meta.get('application_id')!r}, not {APPLICATION_ID!r}): not a tuning "
                    "store; point tuning.store_url elsewhere"
                )
            version = int(meta.get("schema_version", "0"))
            if version > SCHEMA_VERSION:
                raise TuningStoreError(
                    f"{self.where} was written by a newer optserve (tuning store schema {version}; this one "
                    f"reads up to {SCHEMA_VERSION}): upgrade optserve, or use another store"
                )
            if version < 1:
                raise TuningStoreError(f"{self.where} has an unknown tuning store schema version {version!r}")
            if version < SCHEMA_VERSION:
                if self.read_only:
                    raise TuningStoreError(
                        f"{self.where} has tuning store schema {version}; "
                        "open it writable once to migrate it "
                        f"to schema {SCHEMA_VERSION}"
                    )
                if version < 2:
                    self._migrate_1_to_2(cursor)
                if version < 3:
                    self._migrate_2_to_3(cursor)
                self._migrate_3_to_4(cursor)
                self._evict(cursor)

    def _create(self, cursor: Any) -> None:
        self.execute(cursor, META_TABLE)
        for statement in SCHEMA_V2 + SCHEMA_V3_ADDED + SCHEMA_V4_ADDED:
            self.execute(cursor, statement.format(blob=self.blob_type))
        self.execute(
            cursor,
            "INSERT INTO meta (key, value) VALUES ('application_id', ?), ('schema_version', ?)",
            (APPLICATION_ID, str(SCHEMA_VERSION)),
        )

    def _migrate_1_to_2(self, cursor: Any) -> None:
        """Schema 1 -> 2: function entries gain kind and function lists, units their compressed IR, and the
        budgets table appears. Runs inside the caller's (write) transaction: all of it or nothing (the
        caller goes on to version 3 in the same transaction)."""
        self.execute(cursor, "ALTER TABLE units RENAME TO units_v1")
        self.free_table_names(cursor, "units")
        for statement in SCHEMA_V2:
            self.execute(cursor, statement.format(blob=self.blob_type))
        self.execute(
            cursor,
            f"INSERT INTO tuned ({_SELECT}) SELECT 'function', ir_hash, objective, target, llvm_version,"
            " vocabulary, pass_list, '[]', cost, oz_cost, compiles, found_by, found_at FROM tuned_functions",
        )
        self.execute(cursor, "DROP TABLE tuned_functions")
        old_units = self.execute(
            cursor, "SELECT ir_hash, name, ir, first_seen, last_seen, times_seen FROM units_v1"
        ).fetchall()
        for ir_hash, name, ir, first_seen, last_seen, times_seen in old_units:
            blob = zlib.compress(ir.encode(), ZLIB_LEVEL)
            self.execute(
                cursor,
                "INSERT INTO units (ir_hash, name, ir, size, stored_bytes, first_seen, last_seen, times_seen)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (ir_hash, name, blob, len(ir.encode()), len(blob), first_seen, last_seen, times_seen),
            )
        self.execute(cursor, "DROP TABLE units_v1")
        self.execute(cursor, "UPDATE meta SET value = '2' WHERE key = 'schema_version'")

    def _migrate_2_to_3(self, cursor: Any) -> None:
        """Schema 2 -> 3: the raw units' table appears. Inside the caller's (write) transaction."""
        for statement in SCHEMA_V3_ADDED:
            self.execute(cursor, statement.format(blob=self.blob_type))
        self.execute(cursor, "UPDATE meta SET value = '3' WHERE key = 'schema_version'")

    def _migrate_3_to_4(self, cursor: Any) -> None:
        """Schema 3 -> 4: the schedule decisions' table appears. Inside the caller's (write) transaction."""
        for statement in SCHEMA_V4_ADDED:
            self.execute(cursor, statement)
        self.execute(cursor, "UPDATE meta SET value = '4' WHERE key = 'schema_version'")

    # -- tuned lists

    @guarded_read
    def lookup_functions(self, ir_hashes: Sequence[str], toolchain: Toolchain) -> dict[str, TunedList]:
        wanted = sorted(set(ir_hashes))
        if not wanted:
            return {}
        with self.read() as cursor:
            rows = self.function_rows(cursor, wanted, toolchain)
        return {row[1]: row_entry(row) for row in rows}

    @guarded_read
    def lookup_unit(self, ir_hash: str, toolchain: Toolchain) -> TunedList | None:
        with self.read() as cursor:
            row = self.execute(
                cursor,
                f"SELECT {_SELECT} FROM tuned WHERE kind = 'unit' AND ir_hash = ? AND {_TOOLCHAIN_WHERE}",
                (ir_hash, *_toolchain_fields(toolchain)),
            ).fetchone()
        return row_entry(row) if row else None

    @guarded_read
    def has_function_entries(self, toolchain: Toolchain) -> bool:
        with self.read() as cursor:
            row = self.execute(
                cursor,
                f"SELECT 1 FROM tuned WHERE kind = 'function' AND {_TOOLCHAIN_WHERE} LIMIT 1",
                _toolchain_fields(toolchain),
            ).fetchone()
        return row is not None

    @guarded_read
    def holds_entries(self, objective: str, llvm_version: str, vocabulary: str) -> bool:
        fields = (objective, llvm_version, vocabulary)
        where = "objective = ? AND llvm_version = ? AND vocabulary = ?"
        with self.read() as cursor:
            row = self.execute(
                cursor,
                f"SELECT 1 FROM tuned WHERE {where} UNION ALL SELECT 1 FROM budgets WHERE {where} LIMIT 1",
                fields + fields,
            ).fetchone()
        return row is not None

    @guarded
    def offer(self, entries: Sequence[TunedList]) -> int:
        self._check_writable()
        rows = cheapest_per_key(entries)
        if not rows:
            return 0
        with self.write() as cursor:
            stored = self.upsert_rows(cursor, rows)
        offered = {row[:6]: _kept_fields(row) for row in rows}
        return sum(1 for row in stored if offered[tuple(row[:6])] == _kept_fields(row))

    @guarded_read
    def entries(self, toolchain_filter: Toolchain | None = None) -> Iterator[TunedList]:
        with self.read() as cursor:
            if toolchain_filter is None:
                rows = self.execute(cursor, f"SELECT {_SELECT} FROM tuned").fetchall()
            else:
                rows = self.execute(
                    cursor,
                    f"SELECT {_SELECT} FROM tuned WHERE {_TOOLCHAIN_WHERE}",
                    _toolchain_fields(toolchain_filter),
                ).fetchall()
        # Sorted here, not by the database: a server's collation may order text otherwise than code points.
        rows.sort(key=lambda row: (row[2], row[0], row[1], row[3], row[4], row[5]))
        return iter([row_entry(row) for row in rows])

    @guarded_read
    def tuned_budget(self, unit_hash: str, toolchain: Toolchain) -> int:
        with self.read() as cursor:
            row = self.execute(
                cursor,
                f"SELECT budget FROM budgets WHERE unit_hash = ? AND {_TOOLCHAIN_WHERE}",
                (unit_hash, *_toolchain_fields(toolchain)),
            ).fetchone()
        return int(row[0]) if row else 0

    @guarded
    def set_tuned_budget(self, unit_hash: str, toolchain: Toolchain, budget: int) -> None:
        self._check_writable()
        with self.write() as cursor:
            self.execute(
                cursor,
                "INSERT INTO budgets (unit_hash, objective, target, llvm_version, vocabulary, budget)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (unit_hash, objective, target, llvm_version, vocabulary)"
                " DO UPDATE SET budget = CASE WHEN excluded.budget > budgets.budget THEN excluded.budget"
                " ELSE budgets.budget END",
                (unit_hash, *_toolchain_fields(toolchain), int(budget)),
            )

    # -- recorded units

    @guarded
    def record_unit(self, ir_hash: str, ir: str, name: str) -> bool:
        self._check_writable()
        now = time.time()
        data = ir.encode()
        row = self._record_compressed(
            "UPDATE units SET last_seen = ?, times_seen = times_seen + 1,"
            " name = CASE WHEN ? <> '' THEN ? ELSE name END WHERE ir_hash = ?",
            (now, name, name, ir_hash),
            data,
            "INSERT INTO units (ir_hash, name, ir, size, stored_bytes, first_seen, last_seen, times_seen)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (ir_hash) DO UPDATE SET"
            " last_seen = excluded.last_seen, times_seen = units.times_seen + 1 RETURNING times_seen",
            lambda blob: (ir_hash, name, blob, len(data), len(blob), now, now),
        )
        return row is not None and int(row[0]) == 1

    @guarded
    def seen_unit(self, ir_hash: str) -> None:
        if self.read_only:
            return
        with self.write() as cursor:
            self.execute(
                cursor,
                "UPDATE units SET last_seen = ?, times_seen = times_seen + 1 WHERE ir_hash = ?",
                (time.time(), ir_hash),
            )

    def _record_compressed(
        self,
        touch: str,
        touch_parameters: Sequence[Any],
        data: bytes,
        insert: str,
        insert_parameters: Callable[[bytes], Sequence[Any]],
    ) -> Any:
        """Record `data` compressed, once: `touch` updates the row if it is there already (then nothing more
        happens: None); else the data is compressed outside any transaction (other writers need not wait for
        it) and, if it fits the bound, `insert` (its parameters made from the compressed bytes) stores it and
        the least recently seen units are evicted. Returns the row `insert` returned (None: none, or not
        stored)."""
        with self.write() as cursor:
            if self.execute(cursor, touch, touch_parameters).rowcount:
                return None
        blob = zlib.compress(data, ZLIB_LEVEL)
        if len(blob) > self.max_recorded_bytes:
            return None
        with self.write() as cursor:
            self.lock_for_units(cursor)
            row = self.execute(cursor, insert, insert_parameters(blob)).fetchone()
            self._evict(cursor)
        return row

    def _evict(self, cursor: Any) -> None:
        """Delete the least recently seen units and pending raw units until their compressed bytes (IR and
        bitcode together) fit the bound."""
        (total,) = self.execute(
            cursor,
            "SELECT (SELECT COALESCE(SUM(stored_bytes), 0) FROM units)"
            " + (SELECT COALESCE(SUM(stored_bytes), 0) FROM raw_units)",
        ).fetchone()
        excess = int(total) - self.max_recorded_bytes
        if excess <= 0:
            return
        victims = []
        for table, key, stored_bytes, _ in self.execute(
            cursor,
            "SELECT 'units', ir_hash, stored_bytes, last_seen FROM units UNION ALL"
            " SELECT 'raw_units', raw_hash, stored_bytes, recorded_at FROM raw_units WHERE stored_bytes > 0"
            " ORDER BY 4, 2",
        ).fetchall():
            if excess <= 0:
                break
            victims.append((table, key))
            excess -= int(stored_bytes)
        for table, key in victims:
            column = "ir_hash" if table == "units" else "raw_hash"
            self.execute(cursor, f"DELETE FROM {table} WHERE {column} = ?", (key,))

    # -- raw units (bitcode as a client sent it, read later)

    @guarded
    def record_raw(self, raw_hash: str, bitcode: bytes, name: str) -> bool:
        if self.read_only:
            return False
        now = time.time()
        inserted = self._record_compressed(
            "UPDATE raw_units SET recorded_at = ?, name = CASE WHEN ? <> '' THEN ? ELSE name END"
            " WHERE raw_hash = ?",
            (now, name, name, raw_hash),
            bitcode,
            "INSERT INTO raw_units (raw_hash, name, bitcode, size, stored_bytes, recorded_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (raw_hash) DO NOTHING RETURNING raw_hash",
            lambda blob: (raw_hash, name, blob, len(bitcode), len(blob), now),
        )
        return inserted is not None

    @guarded_read
    def raw_unit(self, raw_hash: str) -> tuple[str | None, str | None] | None:
        with self.read() as cursor:
            row = self.execute(
                cursor, "SELECT unit_hash, target FROM raw_units WHERE raw_hash = ?", (raw_hash,)
            ).fetchone()
        return None if row is None else (row[0], row[1])

    @guarded
    def link_raw(self, raw_hash: str, unit_hash: str, target: str) -> None:
        if self.read_only:
            return
        with self.write() as cursor:
            self.execute(
                cursor,
                "INSERT INTO raw_units (raw_hash, name, bitcode, size, stored_bytes, recorded_at, unit_hash,"
                " target) VALUES (?, '', NULL, 0, 0, ?, ?, ?) ON CONFLICT (raw_hash) DO UPDATE SET"
                " unit_hash = excluded.unit_hash, target = excluded.target, bitcode = NULL, stored_bytes = 0",
                (raw_hash, time.time(), unit_hash, target),
            )

    @guarded_read
    def pending_raw(self) -> Iterator[RawUnit]:
        with self.read() as cursor:
            hashes = [
                row[0]
                for row in self.execute(
                    cursor,
                    "SELECT raw_hash FROM raw_units WHERE unit_hash IS NULL AND bitcode IS NOT NULL"
                    " ORDER BY recorded_at DESC, raw_hash",
                ).fetchall()
            ]
        return (unit for unit in map(self._raw, hashes) if unit is not None)

    @guarded_read
    def _raw(self, raw_hash: str) -> RawUnit | None:
        """One pending raw unit (None: linked or evicted meanwhile); damaged compressed bytes read as
        empty bitcode, which a reader refuses and reports."""
        with self.read() as cursor:
            row = self.execute(
                cursor,
                "SELECT name, bitcode, size, recorded_at FROM raw_units"
                " WHERE raw_hash = ? AND unit_hash IS NULL AND bitcode IS NOT NULL",
                (raw_hash,),
            ).fetchone()
        if row is None:
            return None
        name, blob, size, recorded_at = row
        try:
            bitcode = zlib.decompress(bytes(blob))
        except zlib.error:
            bitcode = b""
        return RawUnit(raw_hash, name, bitcode, int(size), float(recorded_at))

    @guarded_read
    def recorded_units(self) -> Iterator[RecordedUnit]:
        with self.read() as cursor:
            hashes = [
                row[0]
                for row in self.execute(
                    cursor, "SELECT ir_hash FROM units ORDER BY last_seen DESC, ir_hash"
                ).fetchall()
            ]
        return self._units(hashes)

    def _units(self, hashes: list[str]) -> Iterator[RecordedUnit]:
        # One unit in memory at a time; a unit evicted meanwhile is skipped.
        for ir_hash in hashes:
            unit = self._unit(ir_hash)
            if unit is not None:
                yield unit

    @guarded_read
    def _unit(self, ir_hash: str) -> RecordedUnit | None:
        with self.read() as cursor:
            row = self.execute(
                cursor,
                "SELECT ir_hash, name, ir, size, first_seen, last_seen, times_seen"
                " FROM units WHERE ir_hash = ?",
                (ir_hash,),
            ).fetchone()
        if row is None:
            return None
        ir_hash, name, blob, size, first_seen, last_seen, times_seen = row
        try:
            ir = zlib.decompress(bytes(blob)).decode()
        except (zlib.error, UnicodeDecodeError) as error:
            raise TuningStoreError(
                f"{self.where}: the recorded IR of unit {ir_hash} is damaged ({error}); delete the store's "
                "recorded units or the store (they are recorded again by the next build)"
            ) from error
        return RecordedUnit(
            ir_hash, name, ir, int(size), float(first_seen), float(last_seen), int(times_seen)
        )

    # -- schedule decisions (LoopTune's, as JSON text: policies/decision_cache.py)

    @guarded_read
    def lookup_decision(
        self, contraction: str, sizes: str, method: str, threads: int, cpu: str
    ) -> str | None:
        with self.read() as cursor:
            row = self.execute(
                cursor,
                "SELECT decision FROM schedule_decisions WHERE contraction = ? AND sizes = ? AND method = ?"
                " AND threads = ? AND cpu = ?",
                (contraction, sizes, method, int(threads), cpu),
            ).fetchone()
        return None if row is None else str(row[0])

    @guarded
    def record_decision(
        self, contraction: str, sizes: str, method: str, threads: int, cpu: str, decision: str
    ) -> None:
        if self.read_only:
            return
        with self.write() as cursor:
            self.execute(
                cursor,
                "INSERT INTO schedule_decisions (contraction, sizes, method, threads, cpu, decision,"
                " decided_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (contraction, sizes, method, threads, cpu)"
                " DO UPDATE SET decision = excluded.decision, decided_at = excluded.decided_at",
                (contraction, sizes, method, int(threads), cpu, decision, time.time()),
            )

    # -- totals

    @guarded_read
    def stats(self) -> StoreStats:
        with self.read() as cursor:
            units, recorded_bytes = self.execute(
                cursor, "SELECT COUNT(*), COALESCE(SUM(stored_bytes), 0) FROM units"
            ).fetchone()
            counts = dict(self.execute(cursor, "SELECT kind, COUNT(*) FROM tuned GROUP BY kind").fetchall())
            saved = self.execute(
                cursor,
                "SELECT objective, SUM(oz_cost - cost) FROM tuned GROUP BY objective ORDER BY objective",
            ).fetchall()
            (compiles,) = self.execute(cursor, "SELECT COALESCE(SUM(compiles), 0) FROM tuned").fetchone()
            pending, raw_bytes = self.execute(
                cursor,
                "SELECT COUNT(*), COALESCE(SUM(stored_bytes), 0) FROM raw_units"
                " WHERE unit_hash IS NULL AND bitcode IS NOT NULL",
            ).fetchone()
            (decisions,) = self.execute(cursor, "SELECT COUNT(*) FROM schedule_decisions").fetchone()
        return StoreStats(
            recorded_units=int(units),
            recorded_bytes=int(recorded_bytes) + int(raw_bytes),
            function_entries=int(counts.get("function", 0)),
            unit_entries=int(counts.get("unit", 0)),
            saved_by_objective={objective: int(total) for objective, total in saved},
            compiles=int(compiles),
            pending_raw_units=int(pending),
            schedule_decisions=int(decisions),
        )

    # -- lifetime

    def close(self) -> None:
        with self._lock:
            self.close_connection()

    def __enter__(self) -> SqlTuningStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r}{', read-only' if self.read_only else ''})"


def _toolchain_fields(toolchain: Toolchain) -> tuple[str, str, str, str]:
    return (toolchain.objective, toolchain.target, toolchain.llvm_version, toolchain.vocabulary)
