"""How far past its deadline an Optimize request keeps the compiler busy, before and after a change.

The request (`--module`), strategy coreset with `--samples` whole-unit lists:
  slow_module   the 1,200-function slow_module of tests/serve (1.2 MB; -Oz ~2 s), the per-function lists
                lifted to the whole unit (engine.unit_function_lists 10, unit_function_lists_max_functions
                5000: 13,200 compiles, which no deadline here fits): the request that overran its 10 s
                deadline by 6 s
  one_function  tests/serve's slow_candidates_module (one function of 600 loops, 1.3 MB), with
                `baseline_cost`: -Oz ~15 s, so each compile cut has seconds left
It runs through the Optimize flow (serve/optimize.py) over a real
CompilerPool of `--workers` processes, in one process as the ingress runs it, without Ray. Per trial:

  answer    answer time minus the deadline
  next      how long a small request (tests/data/serve/add.ll) sent right after the answer takes: it waits
            for any compile the first one left running
  drained   when the first request's last thread ended (asyncio.run returns), minus the deadline

Before the trials, `--restarts` times: a pool call with both workers compiling (one_function at -O3) cut by a
0.3 s deadline, and how long until both stopped workers are restarted and idle again (this code only: the
cost of stopping a compile by killing its worker).

Each trial is a fresh process. With `--before-python` (an interpreter whose `optserve` is the code before the
change, e.g. /work/main/.venv/bin/python for main), every trial runs once with it and once with this one,
alternating, so both see the same machine load.

    python benchmarks/serve_deadline.py --module slow_module --deadlines 2 5 10 --trials 3 \
        --before-python /work/main/.venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SMALL_IR = REPO / "tests" / "data" / "serve" / "add.ll"


# The workloads are the tests' own (one implementation); serve_helpers needs only optserve.config.
sys.path.insert(0, str(REPO))
from tests.serve.serve_helpers import slow_candidates_module, slow_module  # noqa: E402


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


def trial(module: str, deadline_s: float, samples: int, workers: int) -> dict:
    """One request cut by `deadline_s`, then a small one; seconds as in the module docstring."""
    from optserve.compiler.cache import ResultCache
    from optserve.compiler.workers import CompilerPool
    from optserve.config import Settings
    from optserve.serve import schemas
    from optserve.serve.errors import ServiceError
    from optserve.serve.optimize import Optimizer

    settings = Settings.model_validate(
        {"engine": {"unit_function_lists": 10, "unit_function_lists_max_functions": 5000}}
    )
    if module == "slow_module":
        ir, baseline = slow_module(), {}
    else:  # -Oz would not finish by any deadline here: the client's baseline answers
        ir, baseline = slow_candidates_module(), {"baseline_cost": 10**6}
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

    with CompilerPool(processes=workers, timeout_s=20) as pool:
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


def restart_seconds(times: int, workers: int) -> list[float]:
    """Seconds from a call's cut (every worker compiling) until all its workers are idle again."""
    from optserve.compiler.workers import CompilerPool

    ir = slow_candidates_module()
    seconds = []
    with CompilerPool(processes=workers, timeout_s=60) as pool:
        for _ in range(times):
            pool.evaluate(ir, [("-O3",)] * workers, "instruction_count", deadline=time.monotonic() + 0.3)
            cut = time.monotonic()
            while pool.idle_workers() < workers:
                time.sleep(0.002)  # polling the pool for its restarted workers
            seconds.append(time.monotonic() - cut)
    return seconds


def _run_trial(python: str, deadline_s: float, args) -> dict:
    command = [
        python,
        __file__,
        "--trial",
        str(deadline_s),
        "--samples",
        str(args.samples),
        "--module",
        args.module,
    ]
    command += ["--workers", str(args.workers)]
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
    parser.add_argument("--before-python", help="an interpreter importing the code before the change")
    parser.add_argument("--trial", type=float, help=argparse.SUPPRESS)  # one trial, in a child process
    args = parser.parse_args()
    if args.trial is not None:
        print(json.dumps(trial(args.module, args.trial, args.samples, args.workers)))
        return

    versions = {"after": sys.executable} | ({"before": args.before_python} if args.before_python else {})
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, {args.module}")
    for label, python in versions.items():
        print(f"  {label}: {_code_version(python)}")
    if args.restarts:
        restarts = restart_seconds(args.restarts, args.workers)
        print(
            f"  restart of {args.workers} stopped workers: p50 {statistics.median(restarts):.2f} s, "
            f"max {max(restarts):.2f} s over {len(restarts)} (load {os.getloadavg()[0]:.1f})"
        )
    rows: dict[tuple[str, float], list[dict]] = {}
    for deadline_s in args.deadlines:
        for index in range(args.trials):
            order = list(versions) if index % 2 == 0 else list(reversed(versions))
            for label in order:
                row = _run_trial(versions[label], deadline_s, args)
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
