"""`optserve tune`: fill the tuning store off the build's critical path, and move its lists in and out.

    optserve tune [--budget N] [--objective O] [--workers N | --ray-address ADDR] [--limit-units N] [--json]
    optserve tune [options] -- BUILD COMMAND...     # the build first, with CC=optcc CXX=optcc++, then tune
    optserve tune export FILE [--objective O]       # the store's lists as a profile (tuning/profile.py)
    optserve tune import FILE
    optserve tune stats [--json]

The search itself is tuning/tune.py; this module parses, opens the store, starts Ray and reports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optserve.cli import add_json_flag, emit, positive_int
from optserve.objectives import OBJECTIVE_NAMES, Objective

ACTIONS = ("export", "import", "stats")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="tune the units the service recorded (fills the tuning store), or export/import/stats",
        description="Search pass lists for every recorded unit below the budget: per function module "
        "(local search from -Oz and the coreset), then the whole unit as optcc links it; results go to the "
        "tuning store as they come (a killed run keeps them; the next run resumes). Runs as Ray tasks. "
        "`optserve tune -- BUILD COMMAND...` runs the build first with CC=optcc CXX=optcc++ (the running "
        "service records the units it is sent). Other actions: `export FILE [--objective O]`, "
        "`import FILE`, `stats` (each takes --help). docs/tuning.md has the workflow.",
    )
    _add_store_options(parser)
    parser.add_argument(
        "--budget", type=_budget, default=None, help="compiles per function searched (default: config)"
    )
    parser.add_argument(
        "--objective", choices=OBJECTIVE_NAMES, default=None, help="what to minimize (default: text_size)"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="CPUs of the local Ray (default: all)"
    )
    parser.add_argument(
        "--ray-address", default=None, metavar="ADDR", help="join this Ray cluster (its CPUs are the workers)"
    )
    parser.add_argument(
        "--limit-units", type=positive_int, default=None, metavar="N", help="tune at most N units this run"
    )
    add_json_flag(parser)
    parser.add_argument(
        "rest",
        nargs=argparse.REMAINDER,
        metavar="[export|import|stats ...] | -- BUILD COMMAND...",
        help="an action, or the build to run first (after --)",
    )
    parser.set_defaults(handler=_tune_command)


def _add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, metavar="URL", help="the tuning store (default: config)")
    parser.add_argument("--config", type=Path, default=None, help="optserve YAML config")


def _action_parser(action: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"optserve tune {action}")
    _add_store_options(parser)
    if action == "export":
        parser.description = "Write the store's lists as a tuning profile (one reviewable, versioned file)."
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--objective", choices=OBJECTIVE_NAMES, default=None, help="only this objective (default: all)"
        )
    elif action == "import":
        parser.description = "Offer a tuning profile's lists to the store (each kept where cheaper)."
        parser.add_argument("file", type=Path)
    else:
        parser.description = "The store's totals: recorded units and bytes, entries, savings, compiles."
        add_json_flag(parser)
    return parser


def _budget(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 (the -O0 and -Oz baselines), got {text}")
    return value


def _fail(message: str) -> int:
    print(f"optserve tune: {message}", file=sys.stderr)
    return 2


def _tune_command(args: argparse.Namespace) -> int:
    from optserve.config import load_settings
    from optserve.tuning.store import TuningStoreError, open_store

    build: list[str] = []
    if args.rest and args.rest[0] == "--":
        build = args.rest[1:]
        if not build:
            return _fail("no build command after --")
    elif args.rest and args.rest[0] in ACTIONS:
        _action_parser(args.rest[0]).parse_args(args.rest[1:], namespace=args)
    elif args.rest:
        return _fail(
            f"unknown action {args.rest[0]!r} (export, import, stats; a build command goes after --)"
        )
    if args.ray_address and args.workers:
        return _fail("--workers sets the CPUs of a local Ray; a cluster's (--ray-address) CPUs are its own")

    settings = load_settings(args.config)
    action = args.rest[0] if args.rest and not build else "tune"
    try:
        store = open_store(
            url=args.store if args.store is not None else settings.tuning.store_url,
            max_recorded_bytes=settings.tuning.max_recorded_mb * 1024 * 1024,
            read_only=action in ("export", "stats"),
        )
    except TuningStoreError as err:
        return _fail(str(err))
    try:
        if action == "export":
            return _export(store, args)
        if action == "import":
            return _import(store, args)
        if action == "stats":
            return _stats(store, args)
        if build:
            code = _run_build(store, build)
            if code != 0:
                return code
        return _tune(store, settings, args)
    except TuningStoreError as err:
        return _fail(str(err))
    finally:
        store.close()


def _export(store, args: argparse.Namespace) -> int:
    from optserve.tuning.profile import export_profile

    objectives = {args.objective} if args.objective else None
    try:
        count = export_profile(store, args.file, objectives=objectives)
    except OSError as err:
        return _fail(f"cannot write {args.file}: {err.strerror}")
    print(f"optserve tune export: {count} entries -> {args.file}")
    return 0


def _import(store, args: argparse.Namespace) -> int:
    from optserve.tuning.profile import import_profile

    try:
        count = import_profile(store, args.file)
    except OSError as err:
        return _fail(f"cannot read {args.file}: {err.strerror}")
    print(f"optserve tune import: {count} entries from {args.file}")
    return 0


def _stats(store, args: argparse.Namespace) -> int:
    from dataclasses import asdict

    emit(asdict(store.stats()), args.json)
    return 0


def _compiler_wrappers() -> tuple[str, str]:
    """optcc and optcc++: on PATH, else beside this interpreter (a venv's bin/ that is not on PATH)."""
    found = []
    for name in ("optcc", "optcc++"):
        path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if path is None:
            raise FileNotFoundError(f"{name} is not installed (pip install 'optserve[client]')")
        found.append(path)
    return found[0], found[1]


def _units_recorded(store) -> int:
    """Units the store holds for tuning: read, and raw (bitcode the service recorded unread)."""
    stats = store.stats()
    return stats.recorded_units + stats.pending_raw_units


def _run_build(store, command: list[str]) -> int:
    """Run the build with CC=optcc CXX=optcc++; its exit status (tuning follows only a build that passed)."""
    try:
        optcc, optcxx = _compiler_wrappers()
    except FileNotFoundError as err:
        return _fail(str(err))
    before = _units_recorded(store)
    env = {**os.environ, "CC": optcc, "CXX": optcxx}
    print(f"optserve tune: building with CC={optcc} CXX={optcxx}: {' '.join(command)}", file=sys.stderr)
    try:
        code = subprocess.call(command, env=env)
    except OSError as err:
        return _fail(f"cannot run {command[0]}: {err.strerror}")
    recorded = _units_recorded(store) - before
    if code != 0:
        print(f"optserve tune: the build failed (exit {code}); not tuning", file=sys.stderr)
        return code
    if recorded == 0:
        print(
            "optserve tune: the build recorded no new unit (is the service running, with "
            "tuning.record_units, and is the build a size build, -Os/-Oz?)",
            file=sys.stderr,
        )
    else:
        print(f"optserve tune: the build recorded {recorded} new units", file=sys.stderr)
    return 0


def connect_ray(address: str | None, workers: int | None) -> bool:
    """Join the Ray cluster at `address`, or start a local Ray of `workers` CPUs (all when None) listening on
    loopback only; nothing when this process is already connected. Returns whether it connected (and so
    should `ray.shutdown()` at the end)."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        from optserve.serve.replicas.loopback import SINGLE_MACHINE_ENV, local_ray_on_loopback

        local_ray_on_loopback("127.0.0.1")  # its Serve hook is not needed: no Serve runs here
        env = {"env_vars": {SINGLE_MACHINE_ENV: "0"}}
        ray.init("local", num_cpus=workers, include_dashboard=False, log_to_driver=False, runtime_env=env)
    return True


def _tune(store, settings, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from optserve.engine.coreset import Coreset
    from optserve.tuning.tune import (
        CORESET_SEEDS,
        UNIT_CORESET_LISTS,
        RayTasks,
        search_plan,
        tune,
    )

    budget = args.budget or settings.tuning.default_budget
    objective = args.objective or Objective.TEXT_SIZE.value
    coreset = Coreset.load(settings.engine.coreset_path)
    plan = search_plan(
        objective,
        budget,
        coreset.first(objective, max(CORESET_SEEDS, UNIT_CORESET_LISTS)),
        seed_lists=(),
        candidate_timeout_s=settings.compiler.candidate_timeout_s,
        worker_memory_mb=settings.compiler.worker_memory_mb,
        max_ir_bytes=settings.compiler.max_ir_bytes,
    )
    connected: list[bool] = []

    def tasks() -> RayTasks:
        connected.append(connect_ray(args.ray_address, args.workers))
        return RayTasks()

    bar = None

    def progress(summary, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="unit", desc="optserve tune", disable=None, dynamic_ncols=True)
        bar.total = total or None  # 0: raw units are being read, the units to tune not known yet
        bar.n = summary.units + summary.units_failed
        postfix = {"read": summary.raw_units_read} if summary.raw_units_read else {}
        bar.set_postfix(**postfix, functions=summary.functions, compiles=summary.compiles, refresh=False)
        bar.refresh()

    try:
        summary = tune(
            store,
            plan,
            max_functions=settings.engine.unit_function_lists_max_functions,
            limit_units=args.limit_units,
            progress=progress,
            tasks_factory=tasks,
            min_saved=settings.tuning.min_saved_bytes,
        )
    finally:
        if bar is not None:
            bar.close()
        if any(connected):
            import ray

            ray.shutdown()
    emit(summary.as_dict(), args.json, _render)
    return 0


def _render(result: Mapping[str, Any]) -> str:
    r = result
    unit = "bytes" if r["objective"] == Objective.TEXT_SIZE else "instructions"
    lines = [
        f"units: {r['units']} tuned at budget {r['budget']} ({r['units_at_budget']} already at it, "
        f"{r['units_failed']} failed)",
        f"functions: {r['functions']} searched ({r['functions_at_budget']} already at the budget)",
        f"compiles: {r['compiles']} in {r['seconds']:.1f} s, Ray's start {r['startup_seconds']:.1f} s of it "
        f"({r['compiles_per_s']} compiles/s on {r['workers']} workers; "
        f"{r['compiles_per_cpu_s']} per CPU second of compiling)",
        f"saved vs -Oz: {r['saved_by_units']} {unit} of {r['oz_cost_of_units']} by the units' answers "
        f"({r['saved_percent']}%), {r['saved_by_functions']} by the function entries on their own modules",
    ]
    if r.get("units_below_bar"):
        lines.append(
            f"below the bar: {r['units_below_bar']} units' answers save {r['saved_below_bar']} {unit}, under "
            f"tuning.min_saved_bytes ({r['min_saved']}) each: builds give those units -Oz"
        )
    if r["units"] == 0 and not r["failures"]:
        lines = lines[:1]  # nothing was below the budget
    if r["raw_units_read"] or r["raw_units_unreadable"]:
        lines.insert(
            0,
            f"raw units: {r['raw_units_read']} read and recorded as units "
            f"({r['raw_units_unreadable']} LLVM could not read, left pending)",
        )
    lines += [f"failed: {failure}" for failure in r["failures"]]
    return "\n".join(lines)
