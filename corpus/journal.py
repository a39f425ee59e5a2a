"""Durable progress for long jobs: an append-only JSONL journal (the done-set) and atomic file writes.

A job appends one record per finished item and fsyncs it, so a killed job loses at most the items that were
running; on restart, `Journal.records()` gives back everything finished and the job skips it. A record torn by
the kill (a last line without its newline) is cut off, never half-read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def write_jsonl_atomic(path: Path, records: Iterable[dict[str, Any]]) -> int:
    lines = [json.dumps(r, sort_keys=True) + "\n" for r in records]
    write_atomic(path, "".join(lines))
    return len(lines)


class Journal:
    """Append-only JSONL file of finished items, each keyed by `record[key]`."""

    def __init__(self, path: Path, key: str = "key"):
        self.path = path
        self.key = key
        self._file = None

    def records(self, repair: bool = True) -> dict[str, dict[str, Any]]:
        """Every finished record by key; repairs a torn last line left by a killed writer.

        A reader next to a live writer passes `repair=False`: the unfinished line is skipped, not cut off.
        """
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data) and repair:  # the writer died mid-line: drop the fragment so appends start clean
            with open(self.path, "r+b") as f:
                f.truncate(end)
        done: dict[str, dict[str, Any]] = {}
        for line in data[:end].splitlines():
            if line.strip():
                record = json.loads(line)
                done[record[self.key]] = record
        return done

    def append(self, record: dict[str, Any]) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a")  # noqa: SIM115 - kept open across appends, closed in close()
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def journaled(
    items: Iterable[dict[str, Any]],
    measure: Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]],
    path: Path | None,
    key: str = "id",
) -> list[dict[str, Any]]:
    """One row per item, in order: rows already in the journal at `path` as recorded, the others measured
    (`measure` may return None to skip an item) and appended as each finishes, so a killed run resumes.
    No path: nothing is read or written."""
    done = Journal(path, key).records() if path else {}
    rows: list[dict[str, Any]] = []
    with Journal(path or Path("/dev/null"), key) as journal:
        for item in items:
            if item[key] in done:
                rows.append(done[item[key]])
                continue
            row = await measure(item)
            if row is None:
                continue
            rows.append(row)
            if path:
                journal.append(row)
    return rows
