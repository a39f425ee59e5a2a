"""Taking a unit over: the user's clang and the service compile it side by side; the smaller object wins.

optcc.py decides *whether* a command is taken over (command_line.py's rules); this module does it, and is
imported only then, so that commands passed through never pay for its imports (gRPC above all). Each step
has its module: compile_modes.py (clang's object and, beside it, the service's answer),
service_answer.py (whether the unit's budget pays for a call, the call, why there is no answer),
object_choice.py (which object the unit gets, and the checks the service's must pass), unit_report.py
(the unit's log record, stderr lines and statistics); here they run in order, and the result is written and
cached.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from optserve.clients import object_cache
from optserve.clients.command_line import CompileJob, with_optimization
from optserve.clients.compile_modes import compile_both
from optserve.clients.files import ScratchFolder, write_atomically
from optserve.clients.object_choice import all_passes, checked, choose, clang_kept
from optserve.clients.service_answer import NotAsked, ServiceFailure, clang_is_best
from optserve.clients.settings import OptccSettings
from optserve.clients.unit_report import log, notify_fallback, report, unit_record

# gRPC, `subprocess`, `threading` and build_state (`tempfile`) load only where they are used
# (compile_modes.py, service_answer.py): a unit compiled by one clang process (most units) never loads them
# (spawn.py; docs/bench/clients.md).


def compile_unit(
    settings: OptccSettings,
    job: CompileJob,
    level: str,
    slot: object_cache.Slot | None = None,
    process_started: float | None = None,
) -> int:
    """Write the smaller of the two objects for `job` as its output; the exit status of clang's compile.
    With a cache `slot`, a complete service answer's result is stored there for the next build.
    `process_started`: when optcc's imports began (the log's `before_s`: imports and the cache lookup)."""
    started = time.monotonic()
    timing: dict[str, float] = {}  # where the unit's time went, for the log
    if process_started is not None:
        timing["before_s"] = round(started - process_started, 3)
    with ScratchFolder() as scratch:
        clang_object = scratch / "clang.o"
        headers = slot is not None
        compiled = compile_both(settings, job, level, scratch, headers, timing, started)
        clang_stderr, answer = compiled.clang_stderr, compiled.answer
        sys.stderr.buffer.write(clang_stderr)  # the unit's warnings or errors, as clang gave them
        if compiled.returncode != 0:  # an error in the source: the build fails exactly as clang's would
            return compiled.returncode
        if compiled.choice is not None:  # chosen over the record of clang's object: no back end ran
            return _write_answer(settings, job, level, slot, compiled, scratch, timing, started)
        clang_code = clang_object.read_bytes()
        if isinstance(answer, NotAsked):  # decided by the key's settings and clang's time: stored
            record = {**unit_record(job, level), "outcome": "not_asked", "winner": "clang"}
            record |= {"reason": answer.reason, **timing, "seconds": round(time.monotonic() - started, 3)}
            log(settings, record)
            if settings.verbose:
                print(f"optcc: {job.source}: clang's object, not sent: {answer.reason}", file=sys.stderr)
            write_atomically(Path(job.output), clang_code)
            if slot is not None:
                _remember(settings, job, slot, slot.model, clang_code, clang_stderr, scratch, record)
            return 0
        if isinstance(answer, ServiceFailure):
            notify_fallback(settings.clang, level, str(answer), settings, answer.unreachable)
            record = {**unit_record(job, level), "outcome": "fallback", "reason": str(answer), **timing}
            record["seconds"] = round(time.monotonic() - started, 3)  # optcc's whole time, as for answers
            if answer.budget_cut:
                record |= {"winner": "clang", "budget_cut": True}
            log(settings, record)
            write_atomically(Path(job.output), clang_code)
            if slot is not None and answer.budget_cut:  # other fallbacks are transient: asked again
                _remember(settings, job, slot, slot.model, clang_code, clang_stderr, scratch, record)
            return 0
        if clang_is_best(answer):
            choice = clang_kept(clang_code, answer)
        else:
            choice = choose(clang_code, answer.object_code, all_passes(answer.best))
            if choice.winner == "service":  # checked before it is linked or cached (object_trust.py)
                choice = checked(settings, job, choice, clang_code, scratch / "unit.bc")
        compiled.choice = choice
        return _write_answer(settings, job, level, slot, compiled, scratch, timing, started)


def _write_answer(settings, job, level, slot, compiled, scratch: Path, timing, started: float) -> int:
    """Write the object `compiled.choice` chose from the service's answer, log it, and cache it."""
    answer, choice = compiled.answer, compiled.choice
    write_atomically(Path(job.output), choice.object_code)
    record = report(settings, job, level, answer, choice, time.monotonic() - started, timing)
    if slot is not None:
        model = object_cache.model_identity(answer.model_id, answer.model_version)
        object_cache.note_model(slot.root, settings.server, model)
        # the tuning store's answer for a unit not tuned yet is asked again next build: tuning may
        # have found its lists by then (the cache would keep this build's object for ever)
        if not settings.stored or answer.tuning.settled:
            _remember(settings, job, slot, model, choice.object_code, compiled.clang_stderr, scratch, record)
    return 0


def fall_back(
    clang: str, args: list[str], job: CompileJob, level: str, reason: str, settings: OptccSettings | None
) -> list[str]:
    """Say why optcc could not compile the unit; the command that compiles it with clang at its level."""
    notify_fallback(clang, level, reason, settings)
    if settings is not None:
        log(settings, {**unit_record(job, level), "outcome": "fallback", "reason": reason})
    return [clang, *with_optimization(args, level)]


def _remember(settings, job, slot, model: str, object_code: bytes, clang_stderr, scratch: Path, record):
    """Store the unit's result, which `model` gave, in the cache slot (object_cache.py says what is never
    stored)."""
    if model != slot.model:  # the service swapped models since the lookup: not this key's answer
        return
    try:
        headers = object_cache.parse_dependencies((scratch / "unit.d").read_text())
        dependencies = Path(job.dependency_file).read_bytes() if job.dependency_file else None
        slot.store(job.source, headers, object_code, clang_stderr, dependencies, record, settings.recache)
        object_cache.trim_if_due(slot.root, settings.cache_max_bytes)
    except OSError as err:  # a cache that cannot be written costs the next build time, never this one
        if settings.verbose:
            print(f"optcc: {job.source}: not cached: {err}", file=sys.stderr)
