"""optcc: a drop-in C compiler (`CC=optcc make`) that lets optserve choose each translation unit's passes.

For a plain compile (`-c` of one .c file to one object, see command_line.py) optcc
  1. compiles the unit with clang-19 to unoptimized bitcode (`-Oz -Xclang -disable-llvm-passes -emit-llvm`,
     or the thesis' `-O0 -Xclang -disable-O0-optnone -emit-llvm` with OPTCC_IR=o0),
  2. asks the service over gRPC, with a deadline, for the best pass list for the objective, asking for the
     object code of that best candidate (`return_object`),
  3. writes the object code the service returned as the output file.
The object is the one the service compiled and measured, so its cost is the one the service reported.
Every other command goes to clang-19 unchanged. If the service is down, slow, overloaded or answers an error,
optcc compiles the unit with `clang-19 -Oz` instead and says so on stderr once per build: it never breaks a
build that clang would build.

Environment (all optional):
  OPTCC_SERVER     host:port of optserve's gRPC API            (default localhost:9000)
  OPTCC_OBJECTIVE  text_size | instruction_count               (default text_size)
  OPTCC_IR         oz | o0: the unoptimized IR sent (see IR_MODES) (default oz)
  OPTCC_STRATEGY   greedy | priority | nucleus                 (default greedy)
  OPTCC_SAMPLES    model candidates per unit                   (default 1 for greedy, else 10)
  OPTCC_DEADLINE   seconds the service may spend on one unit   (default 10; optcc waits 5 s more)
  OPTCC_RETRY      seconds a build skips a service it found unreachable (default 60)
  OPTCC_CLANG      the clang to run                            (default clang-19)
  OPTCC_LOG        append one JSON line per unit to this file (costs, passes, model, fallbacks)
  OPTCC_VERBOSE    1: one line per unit on stderr, and every fallback, not just the first
  OPTSERVE_TOKEN   the service's auth token, if it has one
  OPTSERVE_CA_CERT PEM CA certificate: call over TLS (OPTCC_SERVER then names the service's grpc_tls_port)
  OPTCC_CAPTURE    DIR: capture mode for corpus building (see capture.py): save the unit's IR exactly as
                   optcc would send it, then compile the command unchanged with clang; no service call
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

from optserve.clients import build_state
from optserve.clients.command_line import CompileJob, plain_compile, with_optimization

OBJECTIVES = ("text_size", "instruction_count")
STRATEGIES = ("greedy", "priority", "nucleus")
# The unoptimized IR sent to the service. `oz` is what clang -Oz itself starts its pipeline from (functions
# carry optsize/minsize and no noinline; TBAA and lifetime markers present), so the service's -Oz floor is
# clang's -Oz. `o0` is the thesis' model input (-O0 without optnone): every function stays `noinline` and
# lacks the size attributes, so its -Oz is ~25% larger .text than clang -Oz (docs/bench/clients.md).
IR_MODES = {
    "oz": ("-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm"),
    "o0": ("-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm"),
}
FALLBACK_LEVEL = "-Oz"


class ConfigError(ValueError):
    """An OPTCC_* variable has a value optcc cannot use."""


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
    def from_environment(cls, env: dict[str, str]) -> OptccSettings:
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
            clang=env.get("OPTCC_CLANG", "clang-19"),
            log_path=env.get("OPTCC_LOG") or None,
            verbose=env.get("OPTCC_VERBOSE", "") not in ("", "0"),
        )


class ServiceFailure(Exception):
    """The service gave no usable answer; `unreachable` when later units should not try it either."""

    def __init__(self, reason: str, unreachable: bool = False):
        super().__init__(reason)
        self.unreachable = unreachable


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    clang = os.environ.get("OPTCC_CLANG", "clang-19")
    job = plain_compile(args)
    if os.environ.get("OPTCC_CAPTURE"):
        from optserve.clients.capture import capture_unit

        if job is not None:
            ir_mode = os.environ.get("OPTCC_IR", "oz").strip().lower()
            capture_unit(Path(os.environ["OPTCC_CAPTURE"]), clang, job, IR_MODES.get(ir_mode, IR_MODES["oz"]))
        return _run([clang, *args])
    if job is None:
        return _run([clang, *args])
    try:
        settings = OptccSettings.from_environment(dict(os.environ))
    except ConfigError as err:
        return _fall_back(clang, args, job, str(err), None)
    try:
        return _compile(settings, args, job)
    except Exception as err:  # a bug in optcc must not break a build either
        return _fall_back(clang, args, job, f"optcc failed: {err!r}", settings)


def _compile(settings: OptccSettings, args: list[str], job: CompileJob) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optcc-") as scratch:
        bitcode_path = Path(scratch) / "unit.bc"
        ir_step = subprocess.run(
            [
                settings.clang,
                *job.ir_flags,
                *IR_MODES[settings.ir_mode],
                "-c",
                job.source,
                "-o",
                str(bitcode_path),
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
        if ir_step.returncode != 0:  # most likely an error in the source: the real compile reports it
            return _run([settings.clang, *with_optimization(args, FALLBACK_LEVEL)])
        try:
            if build_state.service_unreachable_since(settings.retry_s):
                raise ServiceFailure(f"optserve at {settings.server} was unreachable earlier in this build")
            response = _ask_service(settings, bitcode_path.read_bytes())
        except ServiceFailure as failure:
            return _fall_back(settings.clang, args, job, str(failure), settings, failure.unreachable)
    _write_atomically(Path(job.output), response.object_code)
    sys.stderr.buffer.write(ir_step.stderr)  # the unit's warnings, shown once
    _report(settings, job, response, time.monotonic() - started)
    return 0


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


def _fall_back(
    clang: str,
    args: list[str],
    job: CompileJob,
    reason: str,
    settings: OptccSettings | None,
    unreachable=False,
) -> int:
    first = build_state.first_fallback(unreachable)
    if first or (settings is not None and settings.verbose):
        once = "" if settings is not None and settings.verbose else " (shown once per build)"
        print(f"optcc: {reason}; compiling with {clang} {FALLBACK_LEVEL} instead{once}", file=sys.stderr)
    if settings is not None:
        _log(settings, {"source": job.source, "output": job.output, "outcome": "fallback", "reason": reason})
    return _run([clang, *with_optimization(args, FALLBACK_LEVEL)])


def _report(settings: OptccSettings, job: CompileJob, response, seconds: float) -> None:
    best = response.best
    record = {
        "source": job.source,
        "output": job.output,
        "outcome": "service",
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
        "object_bytes": len(response.object_code),
        "seconds": round(seconds, 3),
    }
    _log(settings, record)
    if settings.verbose:
        note = f"; {response.warning}" if response.warning else ""
        print(
            f"optcc: {job.source}: {settings.objective} {best.cost} (-Oz {response.oz_cost}) "
            f"with {' '.join(best.passes)} from {response.model_id} in {seconds:.2f} s{note}",
            file=sys.stderr,
        )


def _log(settings: OptccSettings, record: dict) -> None:
    if not settings.log_path:
        return
    line = (json.dumps(record) + "\n").encode()
    try:  # one append per line, so parallel units (make -j) do not interleave
        descriptor = os.open(settings.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)
    except OSError as err:
        print(f"optcc: cannot write OPTCC_LOG {settings.log_path}: {err}", file=sys.stderr)


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.optcc-{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)


def _run(command: list[str]) -> int:
    try:
        return subprocess.run(command).returncode
    except FileNotFoundError:
        print(f"optcc: {command[0]} not found (set OPTCC_CLANG)", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
