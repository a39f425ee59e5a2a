"""The shared tuning store on a PostgreSQL server (psycopg 3), for a build farm or a Ray cluster.

A batch of offers is one `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO UPDATE` statement: the server
compares each offered cost with the stored one and accumulates compiles under the row's lock, so concurrent
tuners on many machines never lose an update; rows go in key order, so two batches never deadlock. The
schema lives in the connection's current schema (`?options=-csearch_path%3DNAME` picks another), beside any
other application's tables.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import conninfo

from optserve.tuning.base import TuningStoreError
from optserve.tuning.records import Toolchain
from optserve.tuning.sql_store import _SELECT, _TOOLCHAIN_WHERE, UPSERT_TAIL, Row, SqlTuningStore

CONNECT_TIMEOUT_S = 10
_ARRAY_TYPES = ("text",) * 8 + ("bigint",) * 3 + ("text", "float8")
_UPSERT = (
    f"INSERT INTO tuned ({_SELECT}) SELECT * FROM unnest("
    + ", ".join(f"%s::{kind}[]" for kind in _ARRAY_TYPES)
    + ")"
    + UPSERT_TAIL
)
# Advisory lock keys (any fixed numbers): schema creation/migration, unit recording and eviction.
_SCHEMA_LOCK = zlib.crc32(b"optserve-tuning schema")
_UNITS_LOCK = zlib.crc32(b"optserve-tuning units")


def describe(url: str) -> str:
    """Where a PostgreSQL URL points, for messages: host, port, database and user, never the password."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "a PostgreSQL server (unparsable URL)"
    shown = {key: parts[key] for key in ("host", "port", "dbname", "user") if parts.get(key)}
    return "PostgreSQL " + " ".join(f"{key}={value}" for key, value in shown.items())


class PostgresTuningStore(SqlTuningStore):
    """A tuning store in a PostgreSQL database; the connection is reopened after the server went away."""

    driver_errors = (psycopg.Error,)
    placeholder = "%s"
    blob_type = "BYTEA"
    shares_database = True

    def __init__(self, url: str, *, max_recorded_bytes: int, read_only: bool = False):
        super().__init__(describe(url), max_recorded_bytes=max_recorded_bytes, read_only=read_only)
        self.url = url
        self._connection: psycopg.Connection | None = None
        self._closed = False
        self._connect()
        self.prepare_schema()

    def _connect(self) -> psycopg.Connection:
        if self._closed:
            raise TuningStoreError(f"the tuning store {self.where} is closed")
        if self._connection is None or self._connection.closed:
            options = {} if "connect_timeout" in self.url else {"connect_timeout": CONNECT_TIMEOUT_S}
            try:
                self._connection = psycopg.connect(self.url, autocommit=True, **options)
            except psycopg.Error as error:
                raise TuningStoreError(
                    f"cannot connect to the tuning store at {self.where}: {_first_line(error)}; "
                    "start the server, "
                    "or fix tuning.store_url (postgresql://USER@HOST/DBNAME)"
                ) from error
        return self._connection

    @contextmanager
    def _cursor(self, transaction: bool) -> Iterator[psycopg.Cursor]:
        with self._lock:
            connection = self._connect()
            try:
                if transaction:
                    with connection.transaction(), connection.cursor() as cursor:
                        yield cursor
                else:  # autocommit: a read is one statement, one round trip
                    with connection.cursor() as cursor:
                        yield cursor
            except psycopg.OperationalError:
                if connection.closed or connection.broken:
                    self._connection = None  # reconnect on the next call
                raise

    def read(self) -> Any:
        return self._cursor(transaction=False)

    def write(self) -> Any:
        return self._cursor(transaction=True)

    def translate_error(self, error: BaseException) -> TuningStoreError:
        if isinstance(error, psycopg.OperationalError):
            return TuningStoreError(
                f"lost the tuning store at {self.where}: {_first_line(error)}; "
                "check the server (the next call "
                "reconnects)"
            )
        return TuningStoreError(
            f"the tuning store at {self.where} failed: {type(error).__name__}: {_first_line(error)}"
        )

    def lost_connection(self, error: BaseException) -> bool:
        return isinstance(error, psycopg.OperationalError) and self._connection is None and not self._closed

    def table_names(self, cursor: Any) -> set[str]:
        rows = cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        return {name for (name,) in rows}

    def free_table_names(self, cursor: Any, table: str) -> None:
        # PostgreSQL keeps an index's name when its table is renamed; SQLite renames its automatic ones.
        cursor.execute(f"ALTER INDEX IF EXISTS {table}_pkey RENAME TO {table}_old_pkey")

    def lock_for_schema(self, cursor: Any) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))

    def lock_for_units(self, cursor: Any) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_UNITS_LOCK,))

    def upsert_rows(self, cursor: Any, rows: list[Row]) -> list[Row]:
        return cursor.execute(_UPSERT, [list(column) for column in zip(*rows, strict=True)]).fetchall()

    def function_rows(self, cursor: Any, ir_hashes: list[str], toolchain: Toolchain) -> list[Row]:
        fields = (toolchain.objective, toolchain.target, toolchain.llvm_version, toolchain.vocabulary)
        return cursor.execute(
            f"SELECT {_SELECT} FROM tuned WHERE kind = 'function' AND {_TOOLCHAIN_WHERE.replace('?', '%s')}"
            " AND ir_hash = ANY(%s::text[])",
            (*fields, ir_hashes),
        ).fetchall()

    def close_connection(self) -> None:
        self._closed = True
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
