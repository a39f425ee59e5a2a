"""The embedded tuning store: one SQLite file, safe for a `make -j` of processes and several service replicas.

WAL journal (readers never wait for the writer), a busy timeout of a minute (a writer waits for another's
transaction rather than failing), and `BEGIN IMMEDIATE` for every write (the write lock is taken before the
first read of a read-modify-write, so two writers never both read the old cost). synchronous=NORMAL: in WAL
mode a killed process loses nothing it committed, and a power cut at worst the last commits, never the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from optserve.tuning.base import TuningStoreError
from optserve.tuning.records import Toolchain
from optserve.tuning.sql_store import _SELECT, _TOOLCHAIN_WHERE, COLUMNS, UPSERT_TAIL, Row, SqlTuningStore

BUSY_TIMEOUT_S = 60.0
_LOOKUP_CHUNK = 500  # IR hashes per IN (...) list, well under SQLite's bound on parameters
_UPSERT = f"INSERT INTO tuned ({_SELECT}) VALUES ({', '.join('?' for _ in COLUMNS)})" + UPSERT_TAIL
_MOVE_ASIDE = (
    "move it aside or delete it (`optserve tune` finds its lists again, at the cost of their compiles), "
    "or set tuning.store_url to another path"
)


class SqliteTuningStore(SqlTuningStore):
    """A tuning store in a SQLite file (or in memory, for a profile: `path` ':memory:')."""

    driver_errors = (sqlite3.Error,)

    def __init__(
        self,
        path: str | Path,
        *,
        max_recorded_bytes: int,
        read_only: bool = False,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ):
        self.path = str(path)
        self._connection: sqlite3.Connection | None = None
        in_memory = self.path == ":memory:"
        super().__init__(
            "an in-memory store" if in_memory else self.path,
            max_recorded_bytes=max_recorded_bytes,
            read_only=read_only,
        )
        if read_only and not in_memory and not Path(self.path).is_file():
            raise TuningStoreError(f"no tuning store at {self.path} (opened read-only: none is created)")
        try:
            if read_only and not in_memory:
                target = Path(self.path).resolve().as_uri() + "?mode=ro"
                self._connection = sqlite3.connect(
                    target, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
                )
            else:
                self._connection = sqlite3.connect(
                    self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
                )
        except sqlite3.Error as error:
            raise TuningStoreError(f"cannot open the tuning store {self.path}: {error}") from error
        try:
            if not read_only and not in_memory:
                self._connection.execute("PRAGMA journal_mode=WAL")
                self._connection.execute("PRAGMA synchronous=NORMAL")
            self.prepare_schema()
        except sqlite3.Error as error:
            self._connection.close()
            raise self.translate_error(error) from error
        except BaseException:
            self._connection.close()
            raise

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            if self._connection is None:
                raise TuningStoreError(f"the tuning store {self.where} is closed")
            cursor = self._connection.cursor()
            cursor.execute(begin)
            try:
                yield cursor
            except BaseException:
                if self._connection.in_transaction:
                    self._connection.rollback()
                raise
            else:
                cursor.execute("COMMIT")
            finally:
                cursor.close()

    def read(self) -> Any:
        return self._transaction("BEGIN")

    def write(self) -> Any:
        return self._transaction("BEGIN IMMEDIATE")

    def translate_error(self, error: BaseException) -> TuningStoreError:
        text = str(error)
        if "file is not a database" in text:
            return TuningStoreError(
                f"{self.where} is not a tuning store (not a SQLite database): {_MOVE_ASIDE}"
            )
        if "malformed" in text or "corrupt" in text:
            return TuningStoreError(
                f"the tuning store {self.where} is corrupt (SQLite: {text}): {_MOVE_ASIDE}"
            )
        if "locked" in text or "busy" in text:
            return TuningStoreError(
                f"the tuning store {self.where} stayed locked by another process for more than "
                f"{BUSY_TIMEOUT_S:.0f} s ({text}); retry, or find the process holding it"
            )
        if "readonly" in text or "read-only" in text:
            return TuningStoreError(
                f"the tuning store {self.where} cannot be written ({text}); check its permissions"
            )
        return TuningStoreError(f"the tuning store {self.where} failed: {type(error).__name__}: {text}")

    def table_names(self, cursor: Any) -> set[str]:
        rows = cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {name for (name,) in rows if not name.startswith("sqlite_")}

    def upsert_rows(self, cursor: Any, rows: list[Row]) -> list[Row]:
        return [cursor.execute(_UPSERT, row).fetchone() for row in rows]

    def function_rows(self, cursor: Any, ir_hashes: list[str], toolchain: Toolchain) -> list[Row]:
        fields = (toolchain.objective, toolchain.target, toolchain.llvm_version, toolchain.vocabulary)
        rows: list[Row] = []
        for start in range(0, len(ir_hashes), _LOOKUP_CHUNK):
            chunk = ir_hashes[start : start + _LOOKUP_CHUNK]
            rows += cursor.execute(
                f"SELECT {_SELECT} FROM tuned WHERE kind = 'function' AND {_TOOLCHAIN_WHERE}"
                f" AND ir_hash IN ({', '.join('?' for _ in chunk)})",
                (*fields, *chunk),
            ).fetchall()
        return rows

    def close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
