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
import os
import subprocess
from pathlib import Path

from optserve.clients.command_line import SIZE_LEVELS, CompileJob, plain_compile
from optserve.clients.files import append_line
from optserve.clients.settings import ir_step_flags

UNITS = "units"
INDEX = "captured.jsonl"
# Flags with no effect on the unoptimized IR that optcc does not take over yet (assembler and linker options
# in a compile-only command, pipeline and section options): captured units ignore them, so a corpus gets the
# units of builds that use them.
IR_NEUTRAL_FLAGS = frozenset(
    {"-Qunused-arguments", "-pipe", "-funroll-loops", "-fno-unroll-loops", "-ffunction-sections",
     "-fdata-sections", "-fno-semantic-interposition"}
)  # fmt: skip
IR_NEUTRAL_PREFIXES = ("-Wa,", "-Wl,")


def capture_command(directory: Path, clang: str, args: list[str], cxx: bool, ir_mode: str) -> int:
    """Capture every unit of one compiler command (see `compile_jobs`); returns how many were stored.

    Each unit's IR is made as optcc makes it for the service: at the unit's size level, or -Oz (what
    OPTCC_FORCE would take a non-size build over at).
    """
    try:
        stored = 0
        for job in compile_jobs(args, cxx):
            level = job.level if job.level in SIZE_LEVELS else "-Oz"
            stored += capture_unit(directory, clang, job, ir_step_flags(ir_mode, level)) is not None
        return stored
    except Exception as err:  # capturing must never break the build it watches
        _append_line(directory / INDEX, {"args": args, "sha256": None, "error": f"capture failed: {err!r}"})
        return 0


def compile_jobs(args: list[str], cxx: bool = False) -> list[CompileJob]:
    """The units of a command as optcc reads it, plus `-c a.c b.c` (one object per source, named after it)."""
    kept = [arg for arg in args if arg not in IR_NEUTRAL_FLAGS and not arg.startswith(IR_NEUTRAL_PREFIXES)]
    job = plain_compile(kept, cxx)
    if job is not None:
        return [job]
    sources = [arg for arg in kept if not arg.startswith("-") and arg.endswith(".c")]
    if "-c" not in kept or len(sources) < 2 or any(arg.startswith("-o") for arg in kept):
        return []
    others = [arg for arg in kept if arg not in sources]
    return [job for source in sources if (job := plain_compile([*others, source], cxx)) is not None]


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
    path.parent.mkdir(parents=True, exist_ok=True)
    append_line(path, record)
