"""How far past its deadline an Optimize request keeps the compiler busy, before and after a change.

The request (`--module`), strategy coreset with `--samples` whole-unit lists:
  slow_module   the 1,200-function slow_module (1.2 MB; -Oz ~2 s), the per-function lists
                lifted to the whole unit (engine.unit_function_lists 10, unit_function_lists_max_functions
                5000: 13,200 compiles, which no deadline here fits): the request that overran its 10 s
                deadline by 6 s
  one_function  slow_candidates_module (one function of 600 loops, 1.3 MB), with
                `baseline_cost`: -Oz ~15 s, so each compile cut has seconds left
Both are the tests' own inputs (corpus/slow_inputs.py).
It runs through the Optimize flow (serve/optimize/optimizer.py) over a real
CompilerPool of `--workers` processes, in one process as the ingress runs it, without Ray. Per trial:

  answer    answer time minus the deadline
  next      how long a small request (tests/data/serve/add.ll) sent right after the answer takes: it waits
            for any compile the first one left running
  drained   when the first request's last thread ended (asyncio.run returns), minus the deadline

Before the trials, `--restarts` times: a pool call with both workers compiling (one_function at -O3) cut by a
0.3 s deadline, and how long until the pool has both workers idle again (this code only: the cost of
stopping a compile by killing its worker), with `--standby` standby workers and, if `--before-standby`
differs, with that many too.

Each trial is a fresh process, given the module as a file (built once, by this code). With
`--before-python` (an interpreter whose `optserve` is the code before the change, e.g.
/work/main/.venv/bin/python for main), every trial runs once with it and once with this one, alternating, so
both see the same machine load and the same module. `--standby N` gives this code's pool N standby workers
(compiler/workers.py), `--before-standby N` the other's (code from before standby workers takes only 0);
comparing standby with none in this code: `--before-python .venv/bin/python --before-standby 0 --standby 1`.

    python benchmarks/serve_deadline.py --module slow_module --deadlines 2 5 10 --trials 3 \
        --before-python /work/main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL_IR = REPO / "tests" / "data" / "serve" / "add.ll"


class _NoModel:
    """Strategy coreset asks no model; a call here would be a bug in the benchmark."""

    async def generate(self, ir, options, feedback):
        raise AssertionError("strategy coreset does not sample")


async def _metadata():
    from optserve.serve import schemas

    return schemas.ModelMetadata(
        name="none", version="0", backend="torch", platform="cpu", ready=False, reason="coreset only",
        strategies=["coreset"], max_samples=20, max_feedback_rounds=0, max_ir_bytes=1 << 22,
    )  # fmt: skip


def _pool(workers: int, timeout_s: float, standby: int):
    from optserve.compiler.workers import CompilerPool

    # code from before standby workers has no such argument: passed only when asked for
    return CompilerPool(processes=workers, timeout_s=timeout_s, **({"standby": standby} if standby else {}))


def _workload(module: str) -> str:
    """The IR of `--module` (the tests' own inputs: corpus/slow_inputs.py)."""
    from optserve.corpus.slow_inputs import slow_candidates_module, slow_module

    return slow_module() if module == "slow_module" else slow_candidates_module()


def trial(module: str, ir: str, deadline_s: float, samples: int, workers: int, standby: int = 0) -> dict:
    """One request (`ir`, of `--module`) cut by `deadline_s`, then a small one; seconds as in the module
    docstring."""
    from optserve.compiler.cache import ResultCache
    from optserve.config import Settings
    from optserve.serve import schemas
    from optserve.serve.errors import ServiceError
    from optserve.serve.optimize.optimizer import Optimizer

    settings = Settings.model_validate(
        {"engine": {"unit_function_lists": 10, "unit_function_lists_max_functions": 5000}}
    )
    # one_function: -Oz would not finish by any deadline here, the client's baseline answers
    baseline = {} if module == "slow_module" else {"baseline_cost": 10**6}
    cut = schemas.OptimizeRequest(
        ir=ir, strategy="coreset", samples=samples, deadline_s=deadline_s, bypass_cache=True, **baseline
    )
    small = schemas.OptimizeRequest(ir=SMALL_IR.read_text(), strategy="coreset", samples=1, bypass_cache=True)
    outcome: dict = {}

    async def both() -> None:
        optimizer = Optimizer(settings, _NoModel(), pool, ResultCache(4), _metadata)
        started = time.monotonic()
        try:
            answer = await optimizer.optimize(cut)
            outcome["status"] = "deadline_hit" if answer.deadline_hit else "complete"
        except ServiceError as err:
            outcome["status"] = err.kind.name
        outcome["answer_s"] = time.monotonic() - started
        sent = time.monotonic()
        await optimizer.optimize(small)
        outcome["next_s"] = time.monotonic() - sent

    with _pool(workers, 20, standby) as pool:
        started = time.monotonic()
        asyncio.run(both())  # returns once every thread it started has ended
        drained_s = time.monotonic() - started
    return {
        "deadline_s": deadline_s,
        "status": outcome["status"],
        "answer_over_s": outcome["answer_s"] - deadline_s,
        "next_s": outcome["next_s"],
        "drained_over_s": drained_s - deadline_s,
    }


def restart_seconds(times: int, workers: int, standby: int = 0) -> list[float]:
    """Seconds from a call's cut (every worker compiling) until all its workers are idle again."""
    from optserve.deadline import Deadline

    ir = _workload("one_function")
    seconds = []
    with _pool(workers, 60, standby) as pool:
        for _ in range(times):
            while standby and pool.standby_workers() < standby:  # the standby refilled after the last cut
                time.sleep(0.01)
            pool.evaluate(ir, [("-O3",)] * workers, "instruction_count", deadline=Deadline.after(0.3))
            cut = time.monotonic()
            while pool.idle_workers() < workers:
                time.sleep(0.002)  # polling the pool for its restarted workers
            seconds.append(time.monotonic() - cut)
    return seconds


def split_seconds(times: int, stop_after_s: float) -> tuple[list[float], list[float]]:
    """The service's split of slow_module (split_unit, in a compiler worker as the service runs it): seconds
    for the whole split, and seconds past a deadline `stop_after_s` after its start until the call ended
    (its worker killed)."""
    from optserve.compiler.function_lists import split_unit
    from optserve.compiler.workers import CompilerPool
    from optserve.deadline import Deadline, StoppedError

    ir = _workload("slow_module")
    whole, past = [], []
    with CompilerPool(1, 60.0, standby=1) as pool:
        for _ in range(times):
            started = time.monotonic()
            pool.run(split_unit, ir)
            whole.append(time.monotonic() - started)
            started = time.monotonic()
            with contextlib.suppress(StoppedError):
                pool.run(split_unit, ir, deadline=Deadline(started + stop_after_s))
            past.append(time.monotonic() - started - stop_after_s)
            while pool.idle_workers() < 1:
                time.sleep(0.01)  # the killed worker's successor
    return whole, past


def _run_trial(python: str, deadline_s: float, standby: int, ir_file: Path, args) -> dict:
    command = [
        python,
        __file__,
        "--trial",
        str(deadline_s),
        "--samples",
        str(args.samples),
        "--module",
        args.module,
        "--ir-file",
        str(ir_file),
    ]
    command += ["--workers", str(args.workers), "--standby", str(standby)]
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}  # the other interpreter's tree stays untouched
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _code_version(python: str) -> str:
    """Where `python` imports optserve from, and that tree's commit."""
    probe = "import optserve.compiler.workers as w, pathlib; print(pathlib.Path(w.__file__).parents[1])"
    tree = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", tree, "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    return f"{tree} @ {commit}{' (uncommitted changes)' if dirty.strip() else ''}"


def _summary(rows: list[dict], key: str) -> str:
    values = [row[key] for row in rows]
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--module", choices=["slow_module", "one_function"], default="slow_module")
    parser.add_argument("--deadlines", type=float, nargs="+", default=[2.0, 5.0, 10.0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10, help="whole-unit coreset lists")
    parser.add_argument("--workers", type=int, default=2, help="compiler pool processes")
    parser.add_argument("--restarts", type=int, default=10, help="stops whose restart is timed (0: none)")
    parser.add_argument("--splits", type=int, default=0, help="times the ingress's split is timed (0: none)")
    parser.add_argument("--standby", type=int, default=0, help="standby workers of this code's pool")
    parser.add_argument("--before-standby", type=int, default=0, help="standby workers of the other's")
    parser.add_argument("--before-python", help="an interpreter importing the code before the change")
    parser.add_argument("--trial", type=float, help=argparse.SUPPRESS)  # one trial, in a child process
    parser.add_argument("--ir-file", type=Path, help=argparse.SUPPRESS)  # the trial's module
    args = parser.parse_args()
    if args.trial is not None:
        ir = args.ir_file.read_text()
        print(json.dumps(trial(args.module, ir, args.trial, args.samples, args.workers, args.standby)))
        return

    versions = {"after": (sys.executable, args.standby)}
    if args.before_python:
        versions["before"] = (args.before_python, args.before_standby)
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, {args.module}")
    for label, (python, standby) in versions.items():
        print(f"  {label}: {_code_version(python)}, {standby} standby workers")
    if args.splits:
        whole, past = split_seconds(args.splits, 0.5)
        print(
            f"  split of slow_module: p50 {statistics.median(whole):.2f} s, max {max(whole):.2f} s;"
            f" stopped 0.5 s in, ended past that p50 {statistics.median(past):.2f} s, max {max(past):.2f} s"
            f" over {args.splits} (load {os.getloadavg()[0]:.1f})"
        )
    for standby in sorted({args.standby, args.before_standby} if args.before_python else {args.standby}):
        if not args.restarts:
            break
        restarts = restart_seconds(args.restarts, args.workers, standby)
        print(
            f"  restart of {args.workers} stopped workers, {standby} standby: p50 "
            f"{statistics.median(restarts):.2f} s, max {max(restarts):.2f} s over {len(restarts)} "
            f"(load {os.getloadavg()[0]:.1f})"
        )
    rows: dict[tuple[str, float], list[dict]] = {}
    workdir = tempfile.TemporaryDirectory(prefix="serve_deadline_")
    ir_file = Path(workdir.name) / f"{args.module}.ll"
    ir_file.write_text(_workload(args.module))  # one module for both codes' trials
    for deadline_s in args.deadlines:
        for index in range(args.trials):
            order = list(versions) if index % 2 == 0 else list(reversed(versions))
            for label in order:
                row = _run_trial(versions[label][0], deadline_s, versions[label][1], ir_file, args)
                rows.setdefault((label, deadline_s), []).append(row)
                load = os.getloadavg()[0]
                print(f"  {label} deadline {deadline_s:g} s: {json.dumps(row)} (load {load:.1f})", flush=True)
    print("\nseconds, p50 / max over the trials:")
    print(
        "| code | deadline | answer minus deadline | next small request | last thread ended minus deadline |"
    )
    print("|---|---|---|---|---|")
    for (label, deadline_s), found in rows.items():
        statuses = ", ".join(sorted({row["status"] for row in found}))
        print(
            f"| {label} | {deadline_s:g} s ({statuses}) | {_summary(found, 'answer_over_s')} | "
            f"{_summary(found, 'next_s')} | {_summary(found, 'drained_over_s')} |"
        )


if __name__ == "__main__":
    main()
