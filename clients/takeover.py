"""Taking a unit over: the user's clang and the service compile it side by side; the smaller object wins.

optcc.py decides *whether* a command is taken over (command_line.py's rules); this module does it, and is
imported only then, so that commands passed through never pay for its imports (gRPC above all).
"""

from __future__ import annotations

import sys
import time
from collections import namedtuple
from pathlib import Path

from optserve.clients import elf, object_cache, spawn
from optserve.clients.command_line import CompileJob, with_optimization
from optserve.clients.files import ScratchFolder, log_line, write_atomically
from optserve.clients.settings import OptccSettings, ir_step_flags

# `subprocess`, `threading` and build_state (`tempfile`) are imported where they are used, not at the top: a
# unit compiled by one clang process (most units) never loads them (spawn.py; docs/bench/clients.md).

# Sections whose presence in clang's object the chosen object must match (a -g build keeps its debug info).
DEBUG_SECTIONS = frozenset({".debug_info", ".debug_line"})
# Passes whose objects optcc never uses. NewGVN (off in LLVM's own pipelines for its open correctness bugs)
# miscompiles pcre2 10.42: pcre2_study.c after `instcombine jump-threading newgvn dse newgvn sroa` (a coreset
# list the service often picks) loops forever in pcre2test, with LLVM 19's opt as with the service's LLVM 20
# (docs/bench/clients.md). The fix belongs in the pass vocabulary (compiler/passes.py); until then, clang's
# object is kept for such units.
UNSAFE_PASSES = frozenset({"newgvn"})
# Why a unit keeps clang's object when the service's fails object_trust.py's checks (the log's
# `kept_clang_because` starts so; its `untrusted` is true then).
UNTRUSTED = "the service's object failed optcc's checks"


class ServiceFailure(Exception):
    """The service gave no usable answer; `unreachable` when later units should not try it either;
    `budget_cut` when the service itself answered that the unit's deadline ran out (it is up and tried: the
    outcome is the budget's, which the cache key holds, so it is cached as a deadline-cut answer is)."""

    def __init__(self, reason: str, unreachable: bool = False, budget_cut: bool = False):
        super().__init__(reason)
        self.unreachable = unreachable
        self.budget_cut = budget_cut


class NotAsked(namedtuple("NotAsked", "reason")):
    """The unit keeps clang's object without a service call: `reason` says why (its budget, no code)."""

    __slots__ = ()


class Choice(namedtuple("Choice", "winner object_code clang_text service_text reason")):
    """Which object a unit gets: `winner` "service" or "clang", and the `.text` bytes of both (`service_text`
    None when unknown); `reason`: why clang's object was kept although the service's was smaller, else ""."""

    __slots__ = ()


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
        if clang_first(settings, job, headers):
            returncode, clang_stderr, answer = _compile_clang_first(
                settings, job, level, scratch, headers, timing, started
            )
        elif one_front_end(settings, job):
            returncode, clang_stderr, answer = _compile_through_bitcode(
                settings, job, level, scratch, headers, timing, started
            )
        else:
            returncode, clang_stderr, answer = _compile_beside(
                settings, job, level, scratch, headers, timing, started
            )
        sys.stderr.buffer.write(clang_stderr)  # the unit's warnings or errors, as clang gave them
        if returncode != 0:  # an error in the source: the build fails exactly as clang's would
            return returncode
        clang_code = clang_object.read_bytes()
        if isinstance(answer, NotAsked):  # decided by the key's settings and clang's time: stored
            record = {**_unit_record(job, level), "outcome": "not_asked", "winner": "clang"}
            record |= {"reason": answer.reason, **timing, "seconds": round(time.monotonic() - started, 3)}
            _log(settings, record)
            if settings.verbose:
                print(f"optcc: {job.source}: clang's object, not sent: {answer.reason}", file=sys.stderr)
            write_atomically(Path(job.output), clang_code)
            if slot is not None:
                _remember(settings, job, slot, slot.model, clang_code, clang_stderr, scratch, record)
            return 0
        if isinstance(answer, ServiceFailure):
            _notify_fallback(settings.clang, level, str(answer), settings, answer.unreachable)
            record = {**_unit_record(job, level), "outcome": "fallback", "reason": str(answer), **timing}
            record["seconds"] = round(time.monotonic() - started, 3)  # optcc's whole time, as for answers
            if answer.budget_cut:
                record |= {"winner": "clang", "budget_cut": True}
            _log(settings, record)
            write_atomically(Path(job.output), clang_code)
            if slot is not None and answer.budget_cut:  # other fallbacks are transient: asked again
                _remember(settings, job, slot, slot.model, clang_code, clang_stderr, scratch, record)
            return 0
        if clang_is_best(answer):
            choice = _clang_kept(clang_code, answer)
        else:
            choice = _choose(clang_code, answer.object_code, _all_passes(answer.best))
            if choice.winner == "service":  # checked before it is linked or cached (object_trust.py)
                choice = _checked(settings, job, choice, clang_code, scratch / "unit.bc")
        write_atomically(Path(job.output), choice.object_code)
        record = _report(settings, job, level, answer, choice, time.monotonic() - started, timing)
        if slot is not None:
            model = object_cache.model_identity(answer.model_id, answer.model_version)
            object_cache.note_model(slot.root, settings.server, model)
            # the tuning store's answer for a unit not tuned yet is asked again next build: tuning may
            # have found its lists by then (the cache would keep this build's object for ever)
            if not settings.stored or answer.tuning.settled:
                _remember(settings, job, slot, model, choice.object_code, clang_stderr, scratch, record)
    return 0


def front_end_needed_s(settings: OptccSettings) -> float:
    """The shortest front end whose budget pays for a service call: `budget x front end - OPTCC_CALL_OVERHEAD
    >= OPTCC_BUDGET_MIN` (0.3 s with the defaults); 0 without a budget (every unit is sent)."""
    if not settings.budget:
        return 0.0
    return (settings.budget_min_s + settings.call_overhead_s) / settings.budget


def clang_first(settings: OptccSettings, job: CompileJob, headers: bool) -> bool:
    """Whether the unit starts with clang's own one-step compile (`_compile_clang_first`): with a budget
    (OPTCC_BUDGET > 0), unless the cache needs the unit's headers and the command's -MMD file leaves the
    system headers out (then `_compile_beside`)."""
    if settings.stored:  # every unit is asked, through its bitcode: one front end
        return False
    return settings.budget > 0 and not (headers and "-MMD" in job.dependency_flags)


def _compile_clang_first(
    settings: OptccSettings, job: CompileJob, level: str, scratch: Path, headers: bool, timing, started
):
    """Clang's own compile of the unit, one process (the command at its size level: clang's object,
    diagnostics and dependency file); the IR step and the service call only when that compile took at least
    `front_end_needed_s`. A front end is part of its compile, so a unit whose whole compile is quicker has a
    front end too short for its budget to pay for a call: it would not be sent (`_ask_within_budget`'s
    rule), and it costs one clang process, as `clang -c` does (docs/bench/clients.md). Most units of
    a C build are such units (517 of 525 of a measured build). A longer unit then runs the IR step
    (its front end again, timed: the budget's base) and is asked with that deadline, after clang's object
    exists: it takes clang's compile plus its front end plus the call (about 2.5 x clang's compile with the
    default budget 2, at most 4 x).

    (exit status, clang's stderr, the service's answer or why there is none)."""
    dependencies = [] if job.dependency_flags or not headers else ["-MD", "-MF", str(scratch / "unit.d")]
    returncode = spawn.run(
        [settings.clang, *job.clang_args(level, str(scratch / "clang.o")), *dependencies],
        str(scratch / "clang.stderr"),
    )
    compile_s = time.monotonic() - started
    timing["clang_s"] = round(compile_s, 3)
    clang_stderr = (scratch / "clang.stderr").read_bytes()
    if returncode != 0:  # an error in the source: the build fails exactly as clang's would
        return returncode, clang_stderr, ServiceFailure("clang's own compile failed")
    if job.dependency_flags and headers:  # the cache lists the headers from the user's dependency file
        (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
    needed = front_end_needed_s(settings)
    if compile_s < needed:
        reason = (
            f"clang's whole compile took {compile_s:.2f} s: its front end's budget "
            f"({settings.budget:g} x, less the call's {settings.call_overhead_s:g} s) is below "
            f"OPTCC_BUDGET_MIN ({settings.budget_min_s:g} s), which takes {needed:.2f} s of front end"
        )
        return 0, clang_stderr, NotAsked(reason)
    from optserve.clients import build_state

    if build_state.service_unreachable_since(settings.retry_s):  # then the IR step would be wasted too
        return (
            0,
            clang_stderr,
            ServiceFailure(f"optserve at {settings.server} was unreachable earlier in this build"),
        )
    bitcode = scratch / "unit.bc"
    front = _ir_step(settings, job, level, bitcode, (), timing)
    if front.returncode != 0:
        reason = f"the IR step failed: {front.stderr.decode(errors='replace')[-300:]}"
        return 0, clang_stderr, ServiceFailure(reason)
    return 0, clang_stderr, _ask_within_budget(settings, scratch, bitcode, timing, started, job.source)


def _ir_step(settings: OptccSettings, job: CompileJob, level: str, bitcode: Path, dependencies, timing):
    """The unit's IR step (clang's front end to unoptimized bitcode at `bitcode`), timed as
    `timing["ir_step_s"]`: the budget's base. The finished process (returncode, stderr)."""
    import subprocess

    started = time.monotonic()
    command = [settings.clang, *job.ir_flags, *ir_step_flags(settings.ir_mode, level), *dependencies]
    done = subprocess.run(
        [*command, "-c", job.source, "-o", str(bitcode)], stdin=subprocess.DEVNULL, capture_output=True
    )
    timing["ir_step_s"] = round(time.monotonic() - started, 3)
    return done


def one_front_end(settings: OptccSettings, job: CompileJob) -> bool:
    """Whether clang's object is made from the IR step's bitcode (`_compile_through_bitcode`): with the
    -Oz/-Os IR (`OPTCC_IR=oz`, what clang's own pipeline starts from) and no -MMD dependency file, whose
    list of headers the cache could not use (it leaves system headers out)."""
    return settings.ir_mode == "oz" and "-MMD" not in job.dependency_flags


def _compile_through_bitcode(
    settings: OptccSettings, job: CompileJob, level: str, scratch: Path, headers: bool, timing, started
):
    """Clang's own compile in its two halves, the front end once: the IR step (`-Oz -Xclang
    -disable-llvm-passes -emit-llvm`, with the unit's dependency file) writes the bitcode the service gets,
    then `clang -Oz -c unit.bc` runs clang's -Oz pipeline and code generator on it: byte for byte the object
    of `clang -Oz -c unit.c` (every unit of xz-utils and mxml, docs/bench/clients.md), without the second
    front end that compiling beside the IR step cost (72% of clang's time on xz-utils' units). The service is
    asked as soon as the bitcode exists, while that back end runs (unless it is to be told clang's size,
    OPTCC_CLANG_BASELINE=1: then after it). Diagnostics are the two halves' (the front end's, then the code
    generator's). If either half fails, clang's one-step compile runs and decides (an error in the source
    fails the build exactly as clang's would).

    (exit status, clang's stderr, the service's answer or why there is none)."""
    import subprocess
    import threading

    bitcode = scratch / "unit.bc"
    if job.dependency_flags:  # the user's dependency file, as clang names it; the cache reads it too
        dependencies = list(job.dependency_flags)
    else:
        dependencies = ["-MD", "-MF", str(scratch / "unit.d")] if headers else []
    front = subprocess.run(
        [
            settings.clang,
            *job.ir_flags,
            *ir_step_flags(settings.ir_mode, level),
            *dependencies,
            "-c",
            job.source,
            "-o",
            str(bitcode),
        ],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    timing["ir_step_s"] = round(time.monotonic() - started, 3)
    answer = back_stderr = None
    back_ok = False
    if front.returncode == 0:
        if _will_ask(settings, timing["ir_step_s"]):  # the gRPC imports (0.1-0.3 s) load beside clang's half
            threading.Thread(target=_import_client, daemon=True).start()
        with open(scratch / "back.stderr", "w+b") as back_errors:
            back = subprocess.Popen(
                _back_end_command(settings, job, level, bitcode, scratch / "clang.o"),
                stdin=subprocess.DEVNULL,
                stderr=back_errors,
            )
            back_ended = threading.Thread(target=_time_compile, args=(back, started, timing), daemon=True)
            back_ended.start()  # its end is clang_s, whenever the call beside it ends
            try:
                if not settings.sends_clang_baseline:  # the call runs beside clang's back end
                    answer = _ask_within_budget(settings, scratch, bitcode, timing, started, job.source)
            finally:
                back_ended.join()
            back_ok = back.returncode == 0
            back_errors.seek(0)
            back_stderr = back_errors.read()
    if not back_ok:
        own = subprocess.run(
            [settings.clang, *job.clang_args(level, str(scratch / "clang.o"))],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        timing["clang_s"] = round(time.monotonic() - started, 3)
        failed = front.stderr if back_stderr is None else back_stderr
        reason = f"the IR step failed: {failed.decode(errors='replace')[-300:]}"
        return own.returncode, own.stderr, ServiceFailure(reason)
    if job.dependency_flags and headers:  # the cache lists the headers from the user's dependency file
        (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
    if answer is None:  # to be told clang's size: asked once clang's object exists
        answer = _ask_within_budget(settings, scratch, bitcode, timing, started, job.source)
    return 0, front.stderr + back_stderr, answer


def _back_end_command(settings: OptccSettings, job: CompileJob, level: str, bitcode: Path, output: Path):
    """Clang's -Oz (or -Os) pipeline and code generator on the IR step's bitcode: clang's own object."""
    return [  # -x ir: a -x c given before the source must not name the bitcode C
        settings.clang,
        *job.ir_flags,
        level,
        "-Wno-unused-command-line-argument",  # -I, -D, ... mean nothing to bitcode
        "-c",
        "-x",
        "ir",
        str(bitcode),
        "-o",
        str(output),
    ]


def _compile_beside(
    settings: OptccSettings, job: CompileJob, level: str, scratch: Path, headers: bool, timing, started
):
    """Clang's own compile of the source in the background, beside the IR step (with OPTCC_IR=o0, or a -MMD
    dependency file) and the service call. (exit status, clang's stderr, the service's answer or why there
    is none)."""
    import subprocess
    import threading

    with open(scratch / "clang.stderr", "w+b") as clang_errors:
        own = subprocess.Popen(  # the user's own compile runs beside the IR step (and the service)
            [settings.clang, *job.clang_args(level, str(scratch / "clang.o"))],
            stdin=subprocess.DEVNULL,
            stderr=clang_errors,
        )

        clang_ended = threading.Thread(target=_time_compile, args=(own, started, timing), daemon=True)
        clang_ended.start()
        # The gRPC client's imports (0.1-0.3 s) load while clang and the IR step run, not after them.
        threading.Thread(target=_import_client, daemon=True).start()

        def clang_compile() -> bool:
            """Wait for clang's own compile; whether it succeeded."""
            clang_ended.join()
            return own.returncode == 0

        try:
            answer = _service_answer(settings, job, level, scratch, headers, clang_compile, timing, started)
        finally:
            clang_compile()
        clang_errors.seek(0)
        return own.returncode, clang_errors.read(), answer


def _will_ask(settings: OptccSettings, front_end_s: float) -> bool:
    """Whether the unit's budget (from its front end's time, `_ask_within_budget`) pays for a service call:
    then the gRPC imports are worth starting now, beside clang's back end; a unit sent to no service pays
    for none of them."""
    if not settings.budget or settings.stored:
        return True
    return settings.budget * front_end_s - settings.call_overhead_s >= settings.budget_min_s


def _import_client() -> None:
    from optserve.clients import service_call  # noqa: F401


def _time_compile(compile, started: float, timing: dict) -> None:
    """Wait for `compile` and note its wall time as `timing["clang_s"]` (in a thread: the unit's IR step and
    service call go on meanwhile)."""
    compile.wait()
    timing["clang_s"] = round(time.monotonic() - started, 3)


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


def _service_answer(
    settings: OptccSettings,
    job: CompileJob,
    level: str,
    scratch: Path,
    headers: bool,
    clang_compile,
    timing,
    unit_started: float,
):
    """The IR step beside clang's own compile, then the service's answer (`_ask_within_budget`); or the
    ServiceFailure that says why there is none. `headers`: the IR step also lists the files the unit includes
    in scratch/unit.d (for the object cache). The service is asked as soon as the IR step is done, while
    clang's compile goes on; to be told clang's size (OPTCC_CLANG_BASELINE=1), once that compile has ended
    (a unit clang fails on is then not sent)."""
    from optserve.clients import build_state

    if build_state.service_unreachable_since(settings.retry_s):  # then the IR step would be wasted too
        return ServiceFailure(f"optserve at {settings.server} was unreachable earlier in this build")
    bitcode_path = scratch / "unit.bc"
    dependencies = ("-MD", "-MF", str(scratch / "unit.d")) if headers else ()
    ir_step = _ir_step(settings, job, level, bitcode_path, dependencies, timing)
    if ir_step.returncode != 0:  # most likely an error in the source, which clang's own compile reports
        return ServiceFailure(f"the IR step failed: {ir_step.stderr.decode(errors='replace')[-300:]}")
    if settings.sends_clang_baseline and not clang_compile():
        return ServiceFailure("clang's own compile failed")
    return _ask_within_budget(settings, scratch, bitcode_path, timing, unit_started, job.source)


def _ask_within_budget(
    settings: OptccSettings, scratch: Path, bitcode_path: Path, timing, unit_started: float, unit_name: str
):
    """The service's response for the unit's bitcode, or why the service was not asked (NotAsked) or gave
    no answer (ServiceFailure).

    With a budget (OPTCC_BUDGET) the whole call should take at most `budget` times the unit's front end, the
    IR step (`timing["ir_step_s"]`; known when the call starts, before clang's back end ends): the deadline
    sent is that less OPTCC_CALL_OVERHEAD, what a call costs beyond its deadline (the service's grace for a
    compile running at the deadline, the gRPC call through Ray Serve's proxy), at most OPTCC_DEADLINE. The
    call runs beside clang's back end, so the unit takes about (1 + budget) x its front end, and never more
    than (1 + budget) x clang's whole compile, whatever the split (docs/bench/clients.md). A unit
    whose deadline would be below OPTCC_BUDGET_MIN is not sent: it keeps clang's object (below ~0.2 s
    nothing but the call's own cost fits, and on a unit clang compiles in 0.1-0.3 s that cost alone was 2-5
    times clang's). Told clang's size (OPTCC_CLANG_BASELINE=1; asked after clang's compile), a unit whose
    object from clang has no code is not sent either."""
    from optserve.clients import build_state

    if build_state.service_unreachable_since(settings.retry_s):
        return ServiceFailure(f"optserve at {settings.server} was unreachable earlier in this build")
    deadline_s = settings.deadline_s
    if settings.budget and not settings.stored:
        allowed = settings.budget * timing["ir_step_s"] - settings.call_overhead_s
        if allowed < settings.budget_min_s:
            return NotAsked(
                f"its budget, {settings.budget:g} x the front end's {timing['ir_step_s']:.2f} s less the "
                f"call's {settings.call_overhead_s:g} s, is below OPTCC_BUDGET_MIN "
                f"({settings.budget_min_s:g} s)"
            )
        deadline_s = min(deadline_s, allowed)
    baseline_cost = None
    if settings.sends_clang_baseline:  # clang's compile has ended (the call waited for it)
        baseline_cost = _clang_text(scratch / "clang.o")
        if baseline_cost is None:
            return NotAsked("clang's object has no code to make smaller")
        timing["baseline_cost"] = baseline_cost
    timing["deadline_s"] = round(deadline_s, 3)
    _import_client()  # loaded beside clang's work already, or now (beside its back end)
    started = time.monotonic()
    timing["asked_s"] = round(started - unit_started, 3)  # the test of the call's order reads this
    bitcode = bitcode_path.read_bytes()
    timing["bitcode_bytes"] = len(bitcode)
    try:
        return _ask_service(settings, bitcode, deadline_s, baseline_cost, unit_name)
    except ServiceFailure as failure:
        return failure
    finally:
        timing["service_s"] = round(time.monotonic() - started, 3)


def _clang_text(path: Path) -> int | None:
    """`.text` bytes of clang's object, the service's baseline to beat; None if it has none to beat."""
    try:
        return _text_bytes(elf.sections(path.read_bytes())) or None
    except (OSError, elf.NotElf):
        return None


def _text_bytes(sections) -> int:
    return sum(s.size for s in sections if s.flags & elf.SHF_EXECINSTR)


def _ask_service(
    settings: OptccSettings, bitcode: bytes, deadline_s: float, baseline_cost: int | None, unit_name: str = ""
):
    """The service's answer for the unit. With `baseline_cost` (clang's `.text` bytes) that is the service's
    baseline: it returns an object only for a candidate (its own -Oz among them) smaller than that. Without
    it the service's -Oz is its baseline and its best object comes back, compared here with clang's; the
    unoptimized input's cost, which this comparison does not use, is not compiled (`skip_input_cost`)."""
    strategy, samples = settings.for_unit(len(bitcode))
    baseline = {"skip_input_cost": True} if baseline_cost is None else {"baseline_cost": baseline_cost}
    if strategy == "stored":  # optcc compares with clang's object itself: the service compiles no -Oz
        baseline["client_compares"] = True
    import grpc

    from optserve.clients import channel_policy, service_call
    from optserve.clients.python.requests import DEADLINE_MARGIN_S, CallError

    started = time.monotonic()
    try:
        response = service_call.optimize(
            settings.server,
            bitcode,
            objective=settings.objective,
            strategy=strategy,
            samples=samples,
            deadline_s=deadline_s,
            return_object=True,
            unit_name=unit_name,
            **baseline,
        )
    except CallError as err:
        # A service that answers DEADLINE_EXCEEDED itself (its -Oz did not fit a unit's budget) is up; one
        # that let the call's own timeout (deadline + margin) run out is not.
        timed_out = time.monotonic() - started >= deadline_s + DEADLINE_MARGIN_S / 2
        unreachable = err.code is grpc.StatusCode.UNAVAILABLE or (
            err.code is grpc.StatusCode.DEADLINE_EXCEEDED and timed_out
        )
        budget_cut = err.code is grpc.StatusCode.DEADLINE_EXCEEDED and not timed_out
        reason = f"optserve at {settings.server} answered {err}"
        raise ServiceFailure(reason, unreachable, budget_cut) from None
    except channel_policy.Refused as err:  # plaintext beyond loopback: later units of the build skip it too
        raise ServiceFailure(str(err), unreachable=True) from None
    except Exception as err:  # never break a build over a client-side surprise
        raise ServiceFailure(f"calling optserve at {settings.server} failed: {err!r}") from None
    if not response.object_code and not clang_is_best(response):
        raise ServiceFailure(f"optserve at {settings.server} returned no object code")
    return response


def clang_is_best(response) -> bool:
    """The service found no candidate smaller than clang's object, whose size it was told: it sent none, and
    clang's object (whose `.text` optcc measured for the request) is the unit's, with no compile more."""
    from optserve.v1 import optserve_pb2 as pb  # loaded already by the gRPC client

    return response.best.source == pb.CLIENT_BASELINE and not response.object_code


def _clang_kept(clang_code: bytes, response) -> Choice:
    """Clang's object, the service having found nothing smaller; its cheapest candidate's size for the log
    (objective text_size: `.text` bytes as measured by the service)."""
    measured = [c.cost for c in response.candidates if (c.passes or c.function_passes) and c.cost >= 0]
    clang_text = _text_bytes(elf.sections(clang_code))
    return Choice("clang", clang_code, clang_text, min(measured, default=None), "")


def _choose(clang_code: bytes, service_code: bytes, passes=()) -> Choice:
    """The smaller object by `.text` bytes; clang's on a tie, or when the service's cannot be trusted (not
    ELF, debug info missing, or made by a pass list with an UNSAFE_PASSES pass)."""
    clang_sections = elf.sections(clang_code)
    clang_text = _text_bytes(clang_sections)
    try:
        service_sections = elf.sections(service_code)
    except elf.NotElf as err:
        return Choice("clang", clang_code, clang_text, None, f"the service's object: {err}")
    service_text = _text_bytes(service_sections)
    if service_text >= clang_text:
        return Choice("clang", clang_code, clang_text, service_text, "")
    unsafe = UNSAFE_PASSES.intersection(passes)
    if unsafe:
        return Choice("clang", clang_code, clang_text, service_text, f"its list uses {min(unsafe)} (unsafe)")
    missing = DEBUG_SECTIONS & {s.name for s in clang_sections} - {s.name for s in service_sections}
    if missing:
        return Choice(
            "clang", clang_code, clang_text, service_text, f"the service's object lacks {min(missing)}"
        )
    return Choice("service", service_code, clang_text, service_text, "")


def _checked(settings: OptccSettings, job: CompileJob, choice: Choice, clang_code: bytes, bitcode: Path):
    """The service's chosen object if it passes object_trust's checks against clang's object of the unit and
    the bitcode sent; else clang's object, the reason said on stderr and logged (`--stats`: untrusted)."""
    from optserve.clients import object_trust

    refusal = object_trust.refusal(choice.object_code, clang_code, bitcode, settings.clang)
    if not refusal:
        return choice
    reason = f"{UNTRUSTED}: {refusal}"
    if not settings.verbose:  # the verbose line of the unit says it
        print(f"optcc: {job.source}: clang's object kept: {reason}", file=sys.stderr)
    return Choice("clang", clang_code, choice.clang_text, choice.service_text, reason)


def _source_name(source: int) -> str:
    from optserve.v1 import optserve_pb2 as pb

    return pb.CandidateSource.Name(source).lower()


def _unit_record(job: CompileJob, level: str) -> dict:
    return {"source": job.source, "output": job.output, "language": job.language, "level": level}


def _all_passes(candidate) -> set[str]:
    """Every pass the candidate's object was made with (a per_function candidate: each function's)."""
    return set(candidate.passes).union(*(p.split() for p in candidate.function_passes.values()))


def _describe(candidate) -> str:
    if candidate.function_passes:
        return f"a list per function ({len(candidate.function_passes)} functions)"
    return " ".join(candidate.passes)


def _report(
    settings: OptccSettings, job: CompileJob, level: str, response, choice: Choice, seconds: float, timing
) -> dict:
    """Log the unit's outcome (OPTCC_LOG, OPTCC_VERBOSE); the log record."""
    best = response.best
    chosen_text = choice.service_text if choice.winner == "service" else choice.clang_text
    record = {
        **_unit_record(job, level),
        "outcome": "service",
        "winner": choice.winner,
        "clang_text": choice.clang_text,
        "service_text": choice.service_text,
        "saved_bytes": choice.clang_text - chosen_text,
        "kept_clang_because": choice.reason or None,
        "untrusted": choice.reason.startswith(UNTRUSTED),
        "objective": settings.objective,
        "ir_mode": settings.ir_mode,
        "strategy": settings.for_unit(timing.get("bitcode_bytes", 0))[0],
        "samples": settings.for_unit(timing.get("bitcode_bytes", 0))[1],
        "input_cost": response.input_cost,
        "oz_cost": response.oz_cost,
        "oz_skipped": response.oz_skipped,  # told clang's .text size, the deadline came before -Oz's compile
        "best_source": _source_name(best.source),  # client_baseline (clang's), oz, model, coreset_list, ...
        "cost": best.cost,
        "passes": list(best.passes),
        "pipeline": best.pipeline,
        "function_passes": dict(best.function_passes),  # source per_function: a list per function
        "model_id": response.model_id,
        "model_version": response.model_version,
        "cached": response.cached,
        "store_unit_hit": response.tuning.unit_hit,  # the tuning store held the whole unit
        "store_function_hits": response.tuning.function_hits,  # ... or lists of some of its functions
        "store_recorded": response.tuning.recorded,  # the unit was new to the store: recorded for tuning
        "store_settled": response.tuning.settled,  # tuned (or a profile's): optcc's object cache keeps it
        "deadline_hit": response.deadline_hit,
        "warning": response.warning,
        "object_bytes": len(choice.object_code),
        "seconds": round(seconds, 3),
        **timing,  # clang_s, ir_step_s, deadline_s, service_s: optcc's view of where the time went
        "service_total_s": round(response.timings.total_s, 3),
        "service_sample_s": round(response.timings.sample_s, 3),
        "service_compile_s": round(response.timings.compile_s, 3),
    }
    _log(settings, record)
    if settings.verbose:
        other = "n/a" if choice.service_text is None else choice.service_text
        change = (chosen_text - choice.clang_text) / choice.clang_text if choice.clang_text else 0.0
        kept = f" ({choice.reason})" if choice.reason else ""
        note = f"; {response.warning}" if response.warning else ""
        if clang_is_best(response):
            service = "service: nothing smaller" + (f", its best {other} B" if other != "n/a" else "")
        else:
            service = f"service {other} B with {_describe(best)}"
        print(
            f"optcc: {job.source}: {choice.winner} wins{kept}: .text {chosen_text} B, {change:+.1%} vs "
            f"{settings.clang} {level} {choice.clang_text} B ({service} from {response.model_id}) in "
            f"{seconds:.2f} s{note}",
            file=sys.stderr,
        )
    return record


def _notify_fallback(clang: str, level: str, reason: str, settings: OptccSettings | None, unreachable=False):
    verbose = settings is not None and settings.verbose
    from optserve.clients import build_state

    if build_state.first_fallback(unreachable) or verbose:
        once = "" if verbose else " (shown once per build)"
        print(f"optcc: {reason}; using {clang} {level} instead{once}", file=sys.stderr)


def fall_back(
    clang: str, args: list[str], job: CompileJob, level: str, reason: str, settings: OptccSettings | None
) -> list[str]:
    """Say why optcc could not compile the unit; the command that compiles it with clang at its level."""
    _notify_fallback(clang, level, reason, settings)
    if settings is not None:
        _log(settings, {**_unit_record(job, level), "outcome": "fallback", "reason": reason})
    return [clang, *with_optimization(args, level)]


def _log(settings: OptccSettings, record: dict) -> None:
    """The unit's record to OPTCC_LOG, and into optcc's statistics (`optcc --stats`)."""
    import os

    from optserve.clients import stats

    if settings.log_path:
        log_line(settings.log_path, record)
    stats.count(stats.stats_path(settings.cache_dir, dict(os.environ)), record)
