"""The compile modes of a unit taken over: clang's object, and beside it the service's answer, made one of
three ways (`compile_both` picks):

- clang first (`clang_first`: with a budget): clang's own one-step compile; the IR step and the call only
  for a unit whose compile shows a front end long enough for its budget to pay for a call;
- one front end (`one_front_end`: no budget, the -Oz IR): with the bitcode tap, clang's one-step compile
  hands over the unit's bitcode at its front end's end and goes on to its object while the call runs (one
  clang process; a unit with a record of clang's object waits at the tap's gate until the service's object
  has been compared with the record); without it, the IR step's bitcode goes to the service and to clang's
  back end, which makes clang's object from it while the call runs;
- beside: clang's own compile of the source in the background, beside the IR step and the call (OPTCC_IR=o0,
  or a -MMD dependency file).

Each gives a `Compiled`: clang's exit status and diagnostics (its object at scratch/clang.o), and the
service's answer or why there is none (service_answer.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from optserve.clients import spawn
from optserve.clients.command_line import CompileJob
from optserve.clients.service_answer import NotAsked, ServiceFailure, ask_within_budget, import_client
from optserve.clients.settings import OptccSettings, ir_step_flags

# `subprocess`, `threading` and build_state (`tempfile`) are imported where they are used, not at the top: a
# unit compiled by one clang process (most units) never loads them (spawn.py; docs/bench/clients.md).


class Compiled:
    """What a compile mode gives: clang's exit status (`returncode`) and diagnostics (`clang_stderr`), its
    object at scratch/clang.o when the status is 0; and `answer`, the service's OptimizeResponse for the unit
    or why there is none (NotAsked, ServiceFailure). `choice`: the service's object, already chosen over
    the record of clang's object (baseline_memo.py), when clang's back end did not run (no scratch/clang.o).

    A class with slots, not a dataclass: `dataclasses` imports `inspect` (~11 ms of imports), which every unit
    compiled by one clang process would pay for; nothing else on that path loads it."""

    __slots__ = ("returncode", "clang_stderr", "answer", "choice")

    def __init__(self, returncode: int, clang_stderr: bytes, answer, choice=None) -> None:
        self.returncode = returncode
        self.clang_stderr = clang_stderr
        self.answer = answer
        self.choice = choice

    def __repr__(self) -> str:
        return f"Compiled(returncode={self.returncode}, answer={type(self.answer).__name__})"


def compile_both(
    settings: OptccSettings, job: CompileJob, level: str, scratch: Path, headers: bool, timing, started
) -> Compiled:
    """Clang's object of the unit and the service's answer, by the mode its settings and command call for.
    `headers`: the unit's included files are listed in scratch/unit.d (for the object cache); `timing`
    collects where the unit's time went (the log's), from `started`."""
    if clang_first(settings, job, headers):
        return _compile_clang_first(settings, job, level, scratch, headers, timing, started)
    if one_front_end(settings, job):
        tap = _tap(settings)
        if tap is not None:
            gated = _waits_for_tuning(settings, job, level)
            return _compile_tapped(settings, job, level, scratch, headers, timing, started, tap, gated)
        return _compile_through_bitcode(settings, job, level, scratch, headers, timing, started)
    return _compile_beside(settings, job, level, scratch, headers, timing, started)


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
) -> Compiled:
    """Clang's own compile of the unit, one process (the command at its size level: clang's object,
    diagnostics and dependency file); the IR step and the service call only when that compile took at least
    `front_end_needed_s`. A front end is part of its compile, so a unit whose whole compile is quicker has a
    front end too short for its budget to pay for a call: it would not be sent (`ask_within_budget`'s
    rule), and it costs one clang process, as `clang -c` does (docs/bench/clients.md). Most units of
    a C build are such units (517 of 525 of a measured build). A longer unit then runs the IR step
    (its front end again, timed: the budget's base) and is asked with that deadline, after clang's object
    exists: it takes clang's compile plus its front end plus the call (about 2.5 x clang's compile with the
    default budget 2, at most 4 x)."""
    dependencies = [] if job.dependency_flags or not headers else ["-MD", "-MF", str(scratch / "unit.d")]
    returncode = spawn.run(
        [settings.clang, *job.clang_args(level, str(scratch / "clang.o")), *dependencies],
        str(scratch / "clang.stderr"),
    )
    compile_s = time.monotonic() - started
    timing["clang_s"] = round(compile_s, 3)
    clang_stderr = (scratch / "clang.stderr").read_bytes()
    if returncode != 0:  # an error in the source: the build fails exactly as clang's would
        return Compiled(returncode, clang_stderr, ServiceFailure("clang's own compile failed"))
    if job.dependency_flags and headers:  # the cache lists the headers from the user's dependency file
        (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
    needed = front_end_needed_s(settings)
    if compile_s < needed:
        reason = (
            f"clang's whole compile took {compile_s:.2f} s: its front end's budget "
            f"({settings.budget:g} x, less the call's {settings.call_overhead_s:g} s) is below "
            f"OPTCC_BUDGET_MIN ({settings.budget_min_s:g} s), which takes {needed:.2f} s of front end"
        )
        return Compiled(0, clang_stderr, NotAsked(reason))
    from optserve.clients import build_state

    if build_state.service_unreachable_since(settings.retry_s):  # then the IR step would be wasted too
        unreachable = f"optserve at {settings.server} was unreachable earlier in this build"
        return Compiled(0, clang_stderr, ServiceFailure(unreachable))
    bitcode = scratch / "unit.bc"
    front = _ir_step(settings, job, level, bitcode, (), timing)
    if front.returncode != 0:
        reason = f"the IR step failed: {front.stderr.decode(errors='replace')[-300:]}"
        return Compiled(0, clang_stderr, ServiceFailure(reason))
    answer = ask_within_budget(settings, scratch, bitcode, timing, started, job.source)
    return Compiled(0, clang_stderr, answer)


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


def _tap(settings: OptccSettings) -> str | None:
    """The bitcode tap for the unit's one-step compile (bitcode_tap.py), or None for the two-process way:
    OPTCC_TAP=0, or no tap built for this clang yet (a build starts in the background)."""
    if settings.tap_dir is None:
        return None
    from optserve.clients import bitcode_tap

    return bitcode_tap.ready(settings.tap_dir, settings.clang)


def _waits_for_tuning(settings: OptccSettings, job: CompileJob, level: str) -> bool:
    """Whether an earlier build kept a record of clang's object of this output's unit, which waits for
    tuning (baseline_memo.mark_output): its tapped compile waits at the gate for the record to be read and
    the service asked, so that a winning service object skips clang's back end."""
    if not (settings.stored and settings.baselines_dir):
        return False
    from optserve.clients import baseline_memo

    return baseline_memo.output_marked(settings.baselines_dir, job, level)


def _compile_tapped(
    settings: OptccSettings,
    job: CompileJob,
    level: str,
    scratch: Path,
    headers: bool,
    timing,
    started,
    tap,
    gated: bool = False,
) -> Compiled:
    """Clang's own one-step compile with the bitcode tap loaded (bitcode_tap.py): the unit's unoptimized
    bitcode (byte for byte the IR step's) arrives as soon as clang's front end is done, and the service is
    asked with it while clang's -Oz pipeline and code generator go on to clang's own object, which the tap
    leaves untouched: one clang process where the two-process way (`_compile_through_bitcode`) starts two,
    and clang's own diagnostics; the service's object is compared with clang's object itself. A unit the
    store records for tuning (its answer not settled) keeps a record of clang's object and marks its output
    (baseline_memo.py). Its next build, perhaps after `optserve tune`, is `gated`: clang waits at the tap's
    gate while the record is read and the service asked first, told clang's size (`_against_baseline`); a
    service object that beats the record stops clang there (its back end runs on nothing; its dependency
    file is still written; its exit status comes before its process's teardown, which is not waited for),
    any other answer lets it go on to its own object, as without the gate. A gated
    unit with no record goes on at once. If clang cannot load the tap, the tap is marked unusable and the
    unit goes the two-process way."""
    import threading

    from optserve.clients import bitcode_tap

    dependencies = [] if job.dependency_flags or not headers else ["-MD", "-MF", str(scratch / "unit.d")]
    command = [settings.clang, *job.clang_args(level, str(scratch / "clang.o")), *dependencies]
    bitcode, answer, data, baseline, won = scratch / "unit.bc", None, b"", None, None
    told = stopped = False  # clang got the gate's word; the word was to stop
    status = None  # the exit status clang sent on its way out after the word to stop
    compile_timing: dict[str, float] = {}  # clang_s, once its process has ended
    with open(scratch / "clang.stderr", "w+b") as errors:
        own, read_end, gate = bitcode_tap.run_tapped(command, tap, errors, gated)
        ended = threading.Thread(target=_time_compile, args=(own, started, compile_timing), daemon=True)
        ended.start()  # its end is clang_s, whenever the call beside it ends
        try:
            data = bitcode_tap.read_bitcode(read_end)
            timing["ir_step_s"] = round(time.monotonic() - started, 3)  # the front end's end
            timing["tapped"] = True
            if data:
                bitcode.write_bytes(data)
                if gate is not None:  # clang waits: the record first
                    timing["gated"] = True
                    baseline = _recall(settings, job, level, data)[1]
                    if baseline is not None:
                        won, answer = _against_baseline(settings, job, scratch, baseline, timing, started)
                    told = bitcode_tap.open_gate(gate, stop=won is not None)
                    stopped = told and won is not None
                    if stopped:  # its files written: the process's teardown is not waited for
                        status = bitcode_tap.stopped_status(gate)
                    gate = None
                if answer is None:
                    answer = ask_within_budget(settings, scratch, bitcode, timing, started, job.source)
        finally:
            if gate is not None:  # no word given (no bitcode, or an error here): clang goes on
                bitcode_tap.open_gate(gate, stop=False)
            if status != 0:
                ended.join()
                timing.update(compile_timing)
        errors.seek(0)
        clang_stderr = errors.read()
    if stopped and status == 0:  # the service's object, chosen over the record: no back end ran
        if job.dependency_flags and headers:  # the cache reads the headers from the user's file
            (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
        return Compiled(0, _replayed(baseline, clang_stderr), answer, won)
    if own.returncode != 0:
        if bitcode_tap.load_failure(clang_stderr, tap):
            bitcode_tap.broken(settings.tap_dir, settings.clang, clang_stderr.decode(errors="replace")[-400:])
            timing.pop("tapped", None)
            return _compile_through_bitcode(settings, job, level, scratch, headers, timing, started)
        if gated and data and own.returncode > 0 and (stopped or not told):  # not killed: the tap failed
            for step in ("tapped", "gated", "clang_from_record"):  # at the gate: as without the tap
                timing.pop(step, None)
            return _compile_through_bitcode(settings, job, level, scratch, headers, timing, started)
        return Compiled(own.returncode, clang_stderr, ServiceFailure("clang's own compile failed"))
    if job.dependency_flags and headers:  # the cache lists the headers from the user's dependency file
        (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
    if not data:
        return Compiled(0, clang_stderr, ServiceFailure("the bitcode tap wrote no bitcode"))
    timing.pop("clang_from_record", None)  # (a won comparison clang never heard of: it made its object)
    pending = not isinstance(answer, (NotAsked, ServiceFailure)) and not answer.tuning.settled
    if pending and baseline is None and settings.stored and settings.baselines_dir:  # record clang's object
        from optserve.clients import baseline_memo

        record_key = _recall(settings, job, level, data, read=False)[0]
        clang_code = (scratch / "clang.o").read_bytes()
        if record_key and baseline_memo.remember(
            settings.baselines_dir, record_key, clang_code, clang_stderr, whole_stderr=True
        ):
            baseline_memo.mark_output(settings.baselines_dir, job, level)
            baseline_memo.trim_if_due(settings.baselines_dir, settings.cache_max_bytes // 20)
    if gated and _tuned_to_nothing(answer):
        from optserve.clients import baseline_memo

        baseline_memo.mark_output(settings.baselines_dir, job, level, marked=False)  # the gate's wait goes
    return Compiled(0, clang_stderr, answer)


def _compile_through_bitcode(
    settings: OptccSettings, job: CompileJob, level: str, scratch: Path, headers: bool, timing, started
) -> Compiled:
    """Clang's own compile in its two halves, the front end once: the IR step (`-Oz -Xclang
    -disable-llvm-passes -emit-llvm`, with the unit's dependency file) writes the bitcode the service gets,
    then `clang -Oz -c unit.bc` runs clang's -Oz pipeline and code generator on it: byte for byte the object
    of `clang -Oz -c unit.c` (every unit of xz-utils and mxml, docs/bench/clients.md), without the second
    front end that compiling beside the IR step cost (72% of clang's time on xz-utils' units). The service is
    asked as soon as the bitcode exists, while that back end runs (unless it is to be told clang's size,
    OPTCC_CLANG_BASELINE=1: then after it). Diagnostics are the two halves' (the front end's, then the code
    generator's). If either half fails, clang's one-step compile runs and decides (an error in the source
    fails the build exactly as clang's would)."""
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
    answer = back_stderr = record_key = None
    back_ok = False
    if front.returncode == 0 and settings.stored and settings.baselines_dir:
        record_key, baseline = _recall(settings, job, level, bitcode.read_bytes())
        if baseline is not None:  # clang's object is known: the service first, clang's back end if it loses
            won, answer = _against_baseline(settings, job, scratch, baseline, timing, started)
            if won is not None:
                if job.dependency_flags and headers:  # the cache reads the headers from the user's file
                    (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
                return Compiled(0, _replayed(baseline, front.stderr), answer, won)
            record_key = None  # its record stands
    if front.returncode == 0:
        if answer is None and _will_ask(settings, timing["ir_step_s"]):  # gRPC's imports beside clang's half
            threading.Thread(target=import_client, daemon=True).start()
        with open(scratch / "back.stderr", "w+b") as back_errors:
            back = subprocess.Popen(
                _back_end_command(settings, job, level, bitcode, scratch / "clang.o"),
                stdin=subprocess.DEVNULL,
                stderr=back_errors,
            )
            back_ended = threading.Thread(target=_time_compile, args=(back, started, timing), daemon=True)
            back_ended.start()  # its end is clang_s, whenever the call beside it ends
            try:
                if answer is None and not settings.sends_clang_baseline:  # the call beside clang's back end
                    answer = ask_within_budget(settings, scratch, bitcode, timing, started, job.source)
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
        return Compiled(own.returncode, own.stderr, ServiceFailure(reason))
    if job.dependency_flags and headers:  # the cache lists the headers from the user's dependency file
        (scratch / "unit.d").write_bytes(Path(job.dependency_file).read_bytes())
    if record_key is not None:  # the next build of this bitcode may skip clang's back end
        from optserve.clients import baseline_memo

        clang_code = (scratch / "clang.o").read_bytes()
        baseline_memo.remember(settings.baselines_dir, record_key, clang_code, back_stderr)
        baseline_memo.trim_if_due(settings.baselines_dir, settings.cache_max_bytes // 20)
    if answer is None:  # to be told clang's size: asked once clang's object exists
        answer = ask_within_budget(settings, scratch, bitcode, timing, started, job.source)
    if settings.stored and settings.baselines_dir and _tuned_to_nothing(answer):
        from optserve.clients import baseline_memo

        baseline_memo.mark_output(settings.baselines_dir, job, level, marked=False)  # the tap's, ungated
    return Compiled(0, front.stderr + back_stderr, answer)


def _recall(settings: OptccSettings, job: CompileJob, level: str, bitcode: bytes, read: bool = True):
    """The record of clang's object of `bitcode` (baseline_memo.py): (its key, the record); (None, None)
    when the compiler cannot be found, the record None when there is none (or, `read` False, not read)."""
    from optserve.clients import baseline_memo

    record_key = baseline_memo.key(settings.clang, _back_end_command(settings, job, level), bitcode)
    if record_key is None or not read:
        return record_key, None
    return record_key, baseline_memo.recall(settings.baselines_dir, record_key)


def _replayed(baseline, front_stderr: bytes) -> bytes:
    """The diagnostics of a unit whose clang back end did not run: the record's, which are the whole
    one-step compile's when the tap made it, else the back end's after this front end's."""
    return baseline.stderr if baseline.whole_stderr else front_stderr + baseline.stderr


def _tuned_to_nothing(answer) -> bool:
    """Whether the store's answer is settled (tuned) with nothing for the unit: no record can help it."""
    if isinstance(answer, (NotAsked, ServiceFailure)):
        return False
    tuning = answer.tuning
    return tuning.settled and not tuning.unit_hit and not tuning.function_hits


def _against_baseline(settings: OptccSettings, job: CompileJob, scratch: Path, baseline, timing, started):
    """The service asked before clang's back end, told the `.text` bytes of clang's object of this very
    bitcode (`baseline`, baseline_memo.py): (the Choice of the service's object, the answer) when its
    object is smaller and passes object_choice's and object_trust's checks against the record, else (None,
    the answer), and clang's back end runs."""
    from optserve.clients import object_trust
    from optserve.clients.object_choice import all_passes, choose

    bitcode = scratch / "unit.bc"
    answer = ask_within_budget(settings, scratch, bitcode, timing, started, job.source, baseline.text)
    if isinstance(answer, (NotAsked, ServiceFailure)) or not answer.object_code:
        return None, answer
    choice = choose(baseline, answer.object_code, all_passes(answer.best))
    if choice.winner != "service":
        return None, answer
    if object_trust.refusal(choice.object_code, baseline.shape, bitcode, settings.clang):
        return None, answer  # said once clang's object is at hand, by the check against it
    timing["clang_from_record"] = True
    return choice, answer


def _back_end_command(
    settings: OptccSettings,
    job: CompileJob,
    level: str,
    bitcode: Path = Path("unit.bc"),
    output: Path = Path("clang.o"),
):
    """Clang's -Oz (or -Os) pipeline and code generator on the IR step's bitcode: clang's own object (with
    the default paths: the command as baseline_memo.py keys it)."""
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
) -> Compiled:
    """Clang's own compile of the source in the background, beside the IR step (with OPTCC_IR=o0, or a -MMD
    dependency file) and the service call."""
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
        threading.Thread(target=import_client, daemon=True).start()

        def clang_compile() -> bool:
            """Wait for clang's own compile; whether it succeeded."""
            clang_ended.join()
            return own.returncode == 0

        try:
            answer = _service_answer(settings, job, level, scratch, headers, clang_compile, timing, started)
        finally:
            clang_compile()
        clang_errors.seek(0)
        return Compiled(own.returncode, clang_errors.read(), answer)


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
    """The IR step beside clang's own compile, then the service's answer (`ask_within_budget`); or the
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
    return ask_within_budget(settings, scratch, bitcode_path, timing, unit_started, job.source)


def _will_ask(settings: OptccSettings, front_end_s: float) -> bool:
    """Whether the unit's budget (from its front end's time, `ask_within_budget`) pays for a service call:
    then the gRPC imports are worth starting now, beside clang's back end; a unit sent to no service pays
    for none of them."""
    if not settings.budget or settings.stored:
        return True
    return settings.budget * front_end_s - settings.call_overhead_s >= settings.budget_min_s


def _time_compile(compile, started: float, timing: dict) -> None:
    """Wait for `compile` and note its wall time as `timing["clang_s"]` (in a thread: the unit's IR step and
    service call go on meanwhile)."""
    compile.wait()
    timing["clang_s"] = round(time.monotonic() - started, 3)
