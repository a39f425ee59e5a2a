"""optcc's capture mode (`OPTCC_CAPTURE=DIR`): record each translation unit exactly as optcc would send it.

The corpus of real packages is built by running a package's own build with optcc as its C compiler in this
mode. For every command optcc would take over, the unit's unoptimized bitcode (the IR step optcc runs before
calling the service, same flags) is stored content-addressed as `DIR/units/<sha256>.bc`, and one JSON line
is appended to `DIR/captured.jsonl` (hash, source, working directory, tag, arguments). The build itself then
runs the user's command unchanged, so capturing never changes what gets built. A failed IR step is recorded
and skipped: the real compile reports the error.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from optserve.clients.command_line import CompileJob

UNITS = "units"
INDEX = "captured.jsonl"


def capture_unit(directory: Path, clang: str, job: CompileJob, ir_mode_flags: tuple[str, ...]) -> str | None:
    """Store `job`'s unit as bitcode under `directory`; return its sha256, or None when clang failed."""
    units = directory / UNITS
    units.mkdir(parents=True, exist_ok=True)
    scratch = units / f".partial-{os.getpid()}.bc"
    step = subprocess.run(
        [clang, *job.ir_flags, *ir_mode_flags, "-x", job.language, "-c", job.source, "-o", str(scratch)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    record = {
        "source": os.path.abspath(job.source),
        "cwd": os.getcwd(),
        "tag": os.environ.get("OPTCC_CAPTURE_TAG", ""),
        "ir_flags": list(job.ir_flags),
        "ir_mode": list(ir_mode_flags),
    }
    digest = None
    if step.returncode == 0 and scratch.exists():
        bitcode = scratch.read_bytes()
        digest = hashlib.sha256(bitcode).hexdigest()
        os.replace(scratch, units / f"{digest}.bc")
        record.update(sha256=digest, bytes=len(bitcode))
    else:
        scratch.unlink(missing_ok=True)
        record.update(sha256=None, error=step.stderr.decode(errors="replace")[-500:])
    _append_line(directory / INDEX, record)
    return digest


def _append_line(path: Path, record: dict) -> None:
    line = (json.dumps(record) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one write per line, so parallel compiles (make -j) do not interleave
        os.write(descriptor, line)
    finally:
        os.close(descriptor)
