"""How optcc writes files: whole files atomically (objects, cache entries), appended JSON lines (OPTCC_LOG,
the capture index), and a unit's scratch folder. Standard library only: on the compile path of every unit."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Write `path` so that a reader (make, the linker, another compile) sees the old file or the new one."""
    partial = path.with_name(f".{path.name}.optcc-{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


def append_line(path: str | Path, record: dict) -> None:
    """Append `record` as one JSON line, in one write: parallel compiles (make -j) do not interleave."""
    line = (json.dumps(record) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def log_line(path: str, record: dict) -> None:
    """Append `record` to the OPTCC_LOG file `path`; a log that cannot be written is said, not fatal."""
    try:
        append_line(path, record)
    except OSError as err:
        print(f"optcc: cannot write OPTCC_LOG {path}: {err}", file=sys.stderr)


class ScratchFolder:
    """A new folder for one unit's temporary files (`with ScratchFolder() as path:`), removed with them at the
    end: in $TMPDIR (else /tmp), as clang puts its own. Not `tempfile.TemporaryDirectory`: `tempfile` imports
    `shutil` and `random` (a few ms of every unit's start); the folder holds files only."""

    def __enter__(self) -> Path:
        root = os.environ.get("TMPDIR") or "/tmp"
        self.path = Path(root) / f"optcc-{os.getpid()}-{time.monotonic_ns()}"
        self.path.mkdir(mode=0o700)
        return self.path

    def __exit__(self, *exception) -> None:
        for entry in os.scandir(self.path):
            os.unlink(entry.path)
        os.rmdir(self.path)
