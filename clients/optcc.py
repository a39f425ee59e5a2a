"""optcc and optcc++: drop-in C and C++ compilers (`CC=optcc CXX=optcc++ make`) that let optserve choose each
size-optimized translation unit's passes, and never give an object larger than your own clang's.

The promise: for every unit optcc takes over, the object written has no more `.text` bytes than the one
your clang (OPTCC_CLANG, default clang-19; optcc++: OPTCC_CLANGXX, default clang++-19) writes for the same
command at the same size level. Every other command runs on that clang unchanged, with the same result.

optcc takes over only size builds: one `-c` compile of one C or C++ source whose last -O flag is -Os or -Oz
(the full table of rules is in command_line.py and docs/bench/clients.md; OPTCC_DEFAULT_LEVEL and OPTCC_FORCE
widen it). For such a unit it
  1. starts your clang's own compile of the unit at that level, in the background,
  2. compiles the unit to unoptimized bitcode (`-Oz -Xclang -disable-llvm-passes -emit-llvm`, -Os for an
     -Os build; or the thesis' `-O0 -Xclang -disable-O0-optnone -emit-llvm` with OPTCC_IR=o0),
  3. asks the service over gRPC, with a deadline, for the best pass list for the objective and the object
     code of that candidate (`return_object`),
  4. writes the smaller of the two objects by `.text` bytes; a tie keeps clang's. With objective
     instruction_count the service ranks its candidates by IR instructions, but the objects are still
     compared by `.text` bytes: clang's object has no IR to count, and machine code is what the promise is
     about. If clang's object has debug info (`.debug_info`/`.debug_line`) and the service's lacks it,
     clang's is kept.
Warnings, errors, exit status and -MD dependency files are those of your clang's compile. If the service is
down, slow, overloaded or answers an error, the unit gets clang's object and stderr says so once per build:
optcc never breaks a build that clang would build.

Environment (all optional):
  OPTCC_SERVER     host:port of optserve's gRPC API            (default localhost:9000)
  OPTCC_OBJECTIVE  text_size | instruction_count               (default text_size)
  OPTCC_IR         oz | o0: the unoptimized IR sent (see IR_MODES) (default oz)
  OPTCC_STRATEGY   greedy | priority | nucleus                 (default greedy)
  OPTCC_SAMPLES    model candidates per unit                   (default 1 for greedy, else 10)
  OPTCC_DEADLINE   seconds the service may spend on one unit   (default 10; optcc waits 5 s more)
  OPTCC_RETRY      seconds a build skips a service it found unreachable (default 60)
  OPTCC_DEFAULT_LEVEL  s | z: take over units that have no -O flag, at -Os/-Oz (default: pass them through)
  OPTCC_FORCE      1: take over units at any -O level (-O0..-O3, -Og, -Ofast), at OPTCC_DEFAULT_LEVEL or -Oz
  OPTCC_CLANG      optcc's compiler                            (default clang-19)
  OPTCC_CLANGXX    optcc++'s compiler                          (default clang++-19)
  OPTCC_LOG        append one JSON line per unit to this file (winner, sizes, passes, model, fallbacks)
  OPTCC_VERBOSE    1: one line per unit on stderr, and every fallback, not just the first
  OPTSERVE_TOKEN   the service's auth token, if it has one
  OPTSERVE_CA_CERT PEM CA certificate: call over TLS (OPTCC_SERVER then names the service's grpc_tls_port)
  OPTCC_CAPTURE    DIR: capture mode for corpus building (see capture.py): save the unit's IR exactly as
                   optcc would send it (at -Oz unless the unit asks -Os), whatever the command's -O level,
                   then compile the command unchanged with clang; no service call
  OPTCC_CAPTURE_TAG  a label stored with each captured unit (e.g. the Debian package being built)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from optserve.clients import build_state, elf
from optserve.clients.command_line import SIZE_LEVELS, CompileJob, decide, plain_compile, with_optimization

OBJECTIVES = ("text_size", "instruction_count")
STRATEGIES = ("greedy", "priority", "nucleus")
LEVELS = {"s": "-Os", "z": "-Oz", "os": "-Os", "oz": "-Oz", "-os": "-Os", "-oz": "-Oz"}
# The unoptimized IR sent to the service. `oz` is what clang itself starts its -Oz (or -Os) pipeline from
# (functions carry minsize/optsize and no noinline; TBAA and lifetime markers present), so the service's
# -Oz floor is about clang's. `o0` is the thesis' model input (-O0 without optnone): every function stays
# `noinline` and lacks the size attributes, so its -Oz is ~25% larger .text than clang -Oz
# (docs/bench/clients.md), and clang's object then wins nearly every unit.
IR_MODES = {
    "oz": ("-Xclang", "-disable-llvm-passes", "-emit-llvm"),  # after the unit's own size level
    "o0": ("-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm"),
}
# Sections whose presence in clang's object the chosen object must match (a -g build keeps its debug info).
DEBUG_SECTIONS = frozenset({".debug_info", ".debug_line"})


def ir_step_flags(ir_mode: str, level: str) -> tuple[str, ...]:
    """The flags that make clang write the unit's unoptimized bitcode for `level` (-Os/-Oz)."""
    return IR_MODES[ir_mode] if ir_mode == "o0" else (level, *IR_MODES[ir_mode])


class ConfigError(ValueError):
    """An OPTCC_* variable has a value optcc cannot use."""


@dataclass(frozen=True)
class Policy:
    """Which units optcc takes over beyond effective -Os/-Oz (OPTCC_DEFAULT_LEVEL, OPTCC_FORCE)."""

    default_level: str | None
    force: bool

    @classmethod
    def from_environment(cls, env: dict[str, str]) -> Policy:
        level = env.get("OPTCC_DEFAULT_LEVEL", "").strip().lower()
        if level and level not in LEVELS:
            raise ConfigError(f"OPTCC_DEFAULT_LEVEL={level!r} is not s or z")
        return cls(LEVELS[level] if level else None, env.get("OPTCC_FORCE", "") not in ("", "0"))


@dataclass(frozen=True)
class OptccSettings:
    server: str
    objective: str
    ir_mode: str
    strategy: str
    samples: int
    deadline_s: float
    retry_s: float
    clang: str
    log_path: str | None
    verbose: bool

    @classmethod
    def from_environment(cls, env: dict[str, str], clang: str) -> OptccSettings:
        def choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
            value = env.get(name, default).strip().lower()
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
            return value

        def number(name: str, default: float, kind=float):
            try:
                value = kind(env.get(name, default))
            except ValueError:
                raise ConfigError(f"{name}={env[name]!r} is not a number") from None
            if value <= 0:
                raise ConfigError(f"{name}={value} must be positive")
            return value

        strategy = choice("OPTCC_STRATEGY", "greedy", STRATEGIES)
        samples = number("OPTCC_SAMPLES", 1 if strategy == "greedy" else 10, int)
        if strategy == "greedy" and samples != 1:
            raise ConfigError(
                f"OPTCC_SAMPLES={samples}: greedy gives one candidate; set OPTCC_STRATEGY=priority"
            )
        return cls(
            server=env.get("OPTCC_SERVER", "localhost:9000"),
            objective=choice("OPTCC_OBJECTIVE", "text_size", OBJECTIVES),
            ir_mode=choice("OPTCC_IR", "oz", tuple(IR_MODES)),
            strategy=strategy,
            samples=samples,
            deadline_s=number("OPTCC_DEADLINE", 10.0),
            retry_s=number("OPTCC_RETRY", 60.0),
            clang=clang,
            log_path=env.get("OPTCC_LOG") or None,
            verbose=env.get("OPTCC_VERBOSE", "") not in ("", "0"),
        )


class ServiceFailure(Exception):
    """The service gave no usable answer; `unreachable` when later units should not try it either."""

    def __init__(self, reason: str, unreachable: bool = False):
        super().__init__(reason)
        self.unreachable = unreachable


def main(argv: list[str] | None = None) -> int:
    """optcc: the C compiler wrapper."""
    return _wrap(argv, os.environ.get("OPTCC_CLANG", "clang-19"))


def main_cxx(argv: list[str] | None = None) -> int:
    """optcc++: the C++ compiler wrapper (same rules, clang++ as the compiler)."""
    return _wrap(argv, os.environ.get("OPTCC_CLANGXX", "clang++-19"))


def _wrap(argv: list[str] | None, clang: str) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--help"]:  # optcc's own promise and settings first, then clang's options
        print(__doc__, flush=True)
    if os.environ.get("OPTCC_CAPTURE"):
        return _capture(args, clang)
    try:
        policy = Policy.from_environment(dict(os.environ))
    except ConfigError as err:  # a wrong setting must not change what gets built
        print(f"optcc: {err}; passing the command to {clang} unchanged", file=sys.stderr)
        return _run([clang, *args])
    decision = decide(args, policy.default_level, policy.force)
    if decision.level is None:
        if decision.job is not None:
            _log_pass_through(clang, decision.job, decision.reason)
        return _run([clang, *args])
    job, level = decision.job, decision.level
    try:
        settings = OptccSettings.from_environment(dict(os.environ), clang)
    except ConfigError as err:
        return _fall_back(clang, args, job, level, str(err), None)
    try:
        return _compile(settings, job, level)
    except Exception as err:  # a bug in optcc must not break a build either
        return _fall_back(clang, args, job, level, f"optcc failed: {err!r}", settings)


def _capture(args: list[str], clang: str) -> int:
    job = plain_compile(args)
    if job is not None:
        from optserve.clients.capture import capture_unit

        ir_mode = os.environ.get("OPTCC_IR", "oz").strip().lower()
        ir_mode = ir_mode if ir_mode in IR_MODES else "oz"
        level = job.level if job.level in SIZE_LEVELS else "-Oz"  # what OPTCC_FORCE would take it over at
        capture_unit(Path(os.environ["OPTCC_CAPTURE"]), clang, job, ir_step_flags(ir_mode, level))
    return _run([clang, *args])


@dataclass(frozen=True)
class Choice:
    """Which object a unit gets: `winner` "service" or "clang", and the `.text` bytes of both."""

    winner: str
    object_code: bytes
    clang_text: int
    service_text: int | None
    reason: str  # why clang's object was kept although the service's was smaller; else ""


def _compile(settings: OptccSettings, job: CompileJob, level: str) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optcc-") as scratch_name:
        scratch = Path(scratch_name)
        clang_object = scratch / "clang.o"
        with open(scratch / "clang.stderr", "w+b") as clang_errors:
            own = subprocess.Popen(  # the user's own compile runs while the service works
                [settings.clang, *job.clang_args(level, str(clang_object))],
                stdin=subprocess.DEVNULL,
                stderr=clang_errors,
            )
            try:
                answer = _service_answer(settings, job, level, scratch)
            finally:
                own.wait()
            clang_errors.seek(0)
            sys.stderr.buffer.write(clang_errors.read())  # the unit's warnings or errors, as clang gave them
        if own.returncode != 0:  # an error in the source: the build fails exactly as clang's would
            return own.returncode
        clang_code = clang_object.read_bytes()
    if isinstance(answer, ServiceFailure):
        _notify_fallback(settings.clang, level, str(answer), settings, answer.unreachable)
        _log(settings, {**_unit_record(job, level), "outcome": "fallback", "reason": str(answer)})
        _write_atomically(Path(job.output), clang_code)
        return 0
    choice = _choose(clang_code, answer.object_code)
    _write_atomically(Path(job.output), choice.object_code)
    _report(settings, job, level, answer, choice, time.monotonic() - started)
    return 0


def _service_answer(settings: OptccSettings, job: CompileJob, level: str, scratch: Path):
    """The service's response for the unit, or the ServiceFailure that says why there is none."""
    bitcode_path = scratch / "unit.bc"
    ir_step = subprocess.run(
        [
            settings.clang,
            *job.ir_flags,
            *ir_step_flags(settings.ir_mode, level),
            "-x",
            job.language,
            "-c",
            job.source,
            "-o",
            str(bitcode_path),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    if ir_step.returncode != 0:  # most likely an error in the source, which clang's own compile reports
        return ServiceFailure(f"the IR step failed: {ir_step.stderr.decode(errors='replace')[-300:]}")
    if build_state.service_unreachable_since(settings.retry_s):
        return ServiceFailure(f"optserve at {settings.server} was unreachable earlier in this build")
    try:
        return _ask_service(settings, bitcode_path.read_bytes())
    except ServiceFailure as failure:
        return failure


def _ask_service(settings: OptccSettings, bitcode: bytes):
    import grpc

    from optserve.serve.client import CallError, OptserveClient

    try:
        with OptserveClient(settings.server) as client:
            response = client.optimize(
                bitcode,
                objective=settings.objective,
                strategy=settings.strategy,
                samples=settings.samples,
                deadline_s=settings.deadline_s,
                return_object=True,
            )
    except CallError as err:
        unreachable = err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        raise ServiceFailure(f"optserve at {settings.server} answered {err}", unreachable) from None
    except Exception as err:  # never break a build over a client-side surprise
        raise ServiceFailure(f"calling optserve at {settings.server} failed: {err!r}") from None
    if not response.object_code:
        raise ServiceFailure(f"optserve at {settings.server} returned no object code")
    return response


def _choose(clang_code: bytes, service_code: bytes) -> Choice:
    """The smaller object by `.text` bytes; clang's on a tie, or when the service's cannot be trusted."""
    clang_sections = elf.sections(clang_code)
    clang_text = sum(s.size for s in clang_sections if s.flags & elf.SHF_EXECINSTR)
    try:
        service_sections = elf.sections(service_code)
    except elf.NotElf as err:
        return Choice("clang", clang_code, clang_text, None, f"the service's object: {err}")
    service_text = sum(s.size for s in service_sections if s.flags & elf.SHF_EXECINSTR)
    if service_text >= clang_text:
        return Choice("clang", clang_code, clang_text, service_text, "")
    missing = DEBUG_SECTIONS & {s.name for s in clang_sections} - {s.name for s in service_sections}
    if missing:
        return Choice(
            "clang", clang_code, clang_text, service_text, f"the service's object lacks {min(missing)}"
        )
    return Choice("service", service_code, clang_text, service_text, "")


def _unit_record(job: CompileJob, level: str) -> dict:
    return {"source": job.source, "output": job.output, "language": job.language, "level": level}


def _report(
    settings: OptccSettings, job: CompileJob, level: str, response, choice: Choice, seconds: float
) -> None:
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
        "objective": settings.objective,
        "ir_mode": settings.ir_mode,
        "strategy": settings.strategy,
        "samples": settings.samples,
        "input_cost": response.input_cost,
        "oz_cost": response.oz_cost,
        "cost": best.cost,
        "passes": list(best.passes),
        "pipeline": best.pipeline,
        "model_id": response.model_id,
        "model_version": response.model_version,
        "cached": response.cached,
        "deadline_hit": response.deadline_hit,
        "warning": response.warning,
        "object_bytes": len(choice.object_code),
        "seconds": round(seconds, 3),
    }
    _log(settings, record)
    if settings.verbose:
        other = "n/a" if choice.service_text is None else choice.service_text
        change = (chosen_text - choice.clang_text) / choice.clang_text if choice.clang_text else 0.0
        kept = f" ({choice.reason})" if choice.reason else ""
        note = f"; {response.warning}" if response.warning else ""
        print(
            f"optcc: {job.source}: {choice.winner} wins{kept}: .text {chosen_text} B, {change:+.1%} vs "
            f"{settings.clang} {level} {choice.clang_text} B (service {other} B with "
            f"{' '.join(best.passes)} from {response.model_id}) in {seconds:.2f} s{note}",
            file=sys.stderr,
        )


def _notify_fallback(clang: str, level: str, reason: str, settings: OptccSettings | None, unreachable=False):
    verbose = settings is not None and settings.verbose
    if build_state.first_fallback(unreachable) or verbose:
        once = "" if verbose else " (shown once per build)"
        print(f"optcc: {reason}; using {clang} {level} instead{once}", file=sys.stderr)


def _fall_back(
    clang: str, args: list[str], job: CompileJob, level: str, reason: str, settings: OptccSettings | None
) -> int:
    """Compile the unit with clang at its level, after optcc itself could not."""
    _notify_fallback(clang, level, reason, settings)
    if settings is not None:
        _log(settings, {**_unit_record(job, level), "outcome": "fallback", "reason": reason})
    return _run([clang, *with_optimization(args, level)])


def _log_pass_through(clang: str, job: CompileJob, reason: str) -> None:
    path = os.environ.get("OPTCC_LOG")
    if path:
        _append(
            path, {"source": job.source, "output": job.output, "outcome": "passthrough", "reason": reason}
        )
    if os.environ.get("OPTCC_VERBOSE", "") not in ("", "0"):
        print(f"optcc: {job.source}: passed to {clang} unchanged: {reason}", file=sys.stderr)


def _log(settings: OptccSettings, record: dict) -> None:
    if settings.log_path:
        _append(settings.log_path, record)


def _append(path: str, record: dict) -> None:
    line = (json.dumps(record) + "\n").encode()
    try:  # one append per line, so parallel units (make -j) do not interleave
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)
    except OSError as err:
        print(f"optcc: cannot write OPTCC_LOG {path}: {err}", file=sys.stderr)


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.optcc-{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


def _run(command: list[str]) -> int:
    try:
        return subprocess.run(command).returncode
    except FileNotFoundError:
        print(f"optcc: {command[0]} not found (set OPTCC_CLANG or OPTCC_CLANGXX)", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
