"""What clang's object of one exact unit was: the facts optcc compares the service's object with, kept so that
a rebuild of the unit need not make clang's object again when the service's object beats it.

After `optserve tune`, a rebuild gets the tuned lists' object from the service, and optcc compares it with
clang's object of the same bitcode (the never-larger promise). The first build made that object; optcc keeps
what the comparison and object_trust.py's checks read of it — its `.text` bytes, its section names, its
shape (header, sections, global symbols) and the back end's diagnostics — keyed by the exact bitcode, the
back-end command and the compiler (resolved path, size, mtime). A unit whose bitcode has such a record asks
the service first, telling it clang's `.text` bytes (`baseline_cost`); an object that beats them and passes
the checks against the record is the unit's, and clang's back end (most of clang's compile) does not run.
Otherwise clang's back end runs, as without a record. The record holds no code, and the comparison is the
one made with clang's object at hand.

Layout: `<OPTCC_BASELINE_DIR>/<ab>/<key>.json` (default: `baselines/` in optcc's object cache folder), a few
KB per unit; OPTCC_BASELINE_DIR=0 turns it off. A record that cannot be read is a miss.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
from collections import namedtuple
from pathlib import Path

from optserve.clients.files import write_atomically

FORMAT = "optcc-baseline-1"


class Baseline(namedtuple("Baseline", "text section_names shape stderr whole_stderr", defaults=(False,))):
    """Clang's object of a unit as a record: `.text` bytes, section names, object_trust's ObjectShape, and
    the diagnostics of clang's back end (replayed when the back end does not run); `whole_stderr`: they are
    the whole one-step compile's (with the bitcode tap), the front end's included."""

    __slots__ = ()


def key(clang: str, back_end_command: list[str], bitcode: bytes) -> str | None:
    """The record's key: the bitcode's bytes, the back-end command (its input and output paths left out) and
    the compiler's identity; None when the compiler cannot be found."""
    from optserve.clients.object_cache import compiler_identity

    compiler = compiler_identity(clang)
    if compiler is None:
        return None
    inputs = [FORMAT, compiler, back_end_command, hashlib.sha256(bitcode).hexdigest()]
    return hashlib.sha256(json.dumps(inputs, separators=(",", ":")).encode()).hexdigest()


def recall(folder: str, record_key: str) -> Baseline | None:
    """The record under `record_key`, or None (none, or unreadable)."""
    from optserve.clients.object_trust import shape_from_record

    try:
        path = _path(folder, record_key)
        record = json.loads(path.read_bytes())
        if record.get("format") != FORMAT:
            return None
        os.utime(path)  # used: the last to go when the records are trimmed
        return Baseline(
            int(record["text"]),
            frozenset(record["sections"]),
            shape_from_record(record["shape"]),
            base64.b64decode(record["stderr"]),
            bool(record.get("whole_stderr", False)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(
    folder: str, record_key: str, clang_code: bytes, back_stderr: bytes, whole_stderr: bool = False
) -> bool:
    """Keep clang's object `clang_code` (and its back end's diagnostics, or with `whole_stderr` the whole
    one-step compile's) under `record_key`; False when it cannot be read as an object or the record cannot
    be written (never an error: the next build makes clang's object again)."""
    from optserve.clients import elf
    from optserve.clients.object_trust import Untrusted, shape, shape_record

    try:
        sections = elf.sections(clang_code)
        record = {
            "format": FORMAT,
            "text": elf.code_bytes(sections),
            "sections": sorted({s.name for s in sections}),
            "shape": shape_record(shape(clang_code)),
            "stderr": base64.b64encode(back_stderr).decode(),
            "whole_stderr": whole_stderr,
        }
        path = _path(folder, record_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(record, separators=(",", ":")).encode())
        return True
    except (elf.NotElf, Untrusted, OSError):
        return False


def mark_output(folder: str, job, level: str, marked: bool = True) -> None:
    """Note (or, `marked` False, forget) that this output's unit waits for tuning and has a record: its
    next build reads the record before clang's back end runs, which a service object that beats it skips:
    with the bitcode tap, its one-step compile waits at the tap's gate meanwhile (compile_modes.py), else
    it takes the IR step first. An unmarked unit's tapped compile makes clang's whole object beside the
    service's and does not wait."""
    path = _output_mark(folder, job, level)
    with contextlib.suppress(OSError):  # no mark: the next build takes the tap's way, as for any unit
        if marked:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        else:
            path.unlink(missing_ok=True)


def output_marked(folder: str, job, level: str) -> bool:
    """Whether an earlier build left this output's mark (`mark_output`)."""
    return _output_mark(folder, job, level).exists()


def _output_mark(folder: str, job, level: str) -> Path:
    inputs = [FORMAT, os.getcwd(), job.output, list(job.compile_args), list(job.dependency_flags), level]
    digest = hashlib.sha256(json.dumps(inputs, separators=(",", ":")).encode()).hexdigest()
    return Path(folder) / "outputs" / digest


def _path(folder: str, record_key: str) -> Path:
    return Path(folder) / record_key[:2] / f"{record_key}.json"


def trim_if_due(folder: str, max_bytes: int) -> int | None:
    """Remove the least recently used records (a hit touches its file) until they take at most half of
    `max_bytes`, when they take more, at most once per TRIM_EVERY_S per folder; the bytes removed, or None
    when it was not due."""
    import time

    from optserve.clients.object_cache import TRIM_EVERY_S

    if not max_bytes:
        return None
    stamp = Path(folder) / ".trimmed"
    try:
        if time.time() - stamp.stat().st_mtime < TRIM_EVERY_S:
            return None
    except FileNotFoundError:
        pass
    try:
        stamp.touch()
        records = []
        for shard in os.scandir(folder):
            if shard.is_dir():
                for entry in os.scandir(shard.path):
                    status = entry.stat()
                    records.append((status.st_mtime, status.st_size, entry.path))
    except OSError:
        return None
    total = sum(size for _, size, _ in records)
    if total <= max_bytes:
        return 0
    removed = 0
    for _, size, path in sorted(records):
        if total - removed <= max_bytes / 2:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += size
    return removed
