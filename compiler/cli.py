"""`optserve autotune FILE.ll`: search for a pass list that beats -Oz on one IR file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optserve.cli import add_json_flag, emit, positive_int
from optserve.objectives import OBJECTIVE_NAMES, Objective


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "autotune",
        help="search for a pass list that beats -Oz on an IR file",
        description="Random search over pass lists under a compile budget (and optional time limit), with "
        "-Oz as the floor, then minimization. Prints the -Oz cost, the best cost and list, and the "
        "compilations used.",
    )
    parser.add_argument("file", type=Path, help="LLVM IR text (.ll) or bitcode (.bc)")
    parser.add_argument("--budget", type=positive_int, required=True, help="random candidates to compile")
    parser.add_argument(
        "--time-limit", type=_positive_float, default=None, metavar="S", help="stop search after S s"
    )
    parser.add_argument(
        "--objective",
        choices=OBJECTIVE_NAMES,
        default=Objective.INSTRUCTION_COUNT.value,
        help="what to minimize",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed (same seed and budget = same result)"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="worker processes (default: config)"
    )
    parser.add_argument("--config", type=Path, default=None, help="optserve YAML config")
    add_json_flag(parser)
    parser.set_defaults(handler=_autotune_command)


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _autotune_command(args: argparse.Namespace) -> int:
    from optserve.compiler.autotune import autotune
    from optserve.compiler.ir import IRError, parse_ir
    from optserve.compiler.passes import format_pass_list, to_opt_pipeline
    from optserve.compiler.workers import CompilerPool
    from optserve.config import load_settings

    settings = load_settings(args.config).compiler
    try:
        ir = parse_ir(args.file.read_bytes(), settings.max_ir_bytes)
    except OSError as err:
        print(f"optserve autotune: cannot read {args.file}: {err.strerror}", file=sys.stderr)
        return 2
    except IRError as err:
        print(f"optserve autotune: {args.file}: {err}", file=sys.stderr)
        return 2

    processes = args.workers or settings.workers
    pool = CompilerPool(
        processes,
        settings.candidate_timeout_s,
        memory_limit_mb=settings.worker_memory_mb,
        burst=0 if args.workers else settings.burst_workers,  # --workers N: N processes, no more
    )
    with pool, _progress_bar(args) as progress:
        result = autotune(
            ir,
            budget=args.budget,
            objective=args.objective,
            time_limit_s=args.time_limit,
            seed=args.seed,
            pool=pool,
            progress=progress,
        )
    emit(
        {
            "file": str(args.file),
            "objective": result.objective,
            "unoptimized_cost": result.unoptimized_cost,
            "oz_cost": result.oz_cost,
            "best_cost": result.best_cost,
            "improvement_over_oz_percent": round(100 * result.improvement_over_oz, 3),
            "best_pass_list": format_pass_list(result.best_pass_list),
            "opt_pipeline": to_opt_pipeline(result.best_pass_list),
            "compilations": result.compilations,
            "search_compilations": result.search_compilations,
            "minimization_compilations": result.minimization_compilations,
            "failed_compilations": result.failed_compilations,
            "seconds": round(result.seconds, 3),
            "seed": args.seed,
        },
        args.json,
        _render,
    )
    return 0


class _progress_bar:
    """A tqdm bar on stderr when it is a terminal; otherwise no progress output."""

    def __init__(self, args: argparse.Namespace):
        self._bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=args.budget, unit="compile", desc="autotune", file=sys.stderr)

    def __enter__(self):
        return self._update if self._bar is not None else None

    def _update(self, done: int, total: int, best_cost: int) -> None:
        self._bar.update(done - self._bar.n)
        self._bar.set_postfix(best=best_cost)

    def __exit__(self, *exc_info) -> None:
        if self._bar is not None:
            self._bar.close()


def _render(result: Mapping[str, Any]) -> str:
    return "\n".join(
        [
            f"{result['file']} ({result['objective']})",
            f"  unoptimized cost: {result['unoptimized_cost']}",
            f"  -Oz cost:         {result['oz_cost']}",
            f"  best cost:        {result['best_cost']} ({result['improvement_over_oz_percent']}% below -Oz)",
            f"  best pass list:   {result['best_pass_list'] or '(none)'}",
            f"  opt -passes=      '{result['opt_pipeline']}'",
            f"  compilations:     {result['compilations']} "
            f"({result['search_compilations']} search, {result['minimization_compilations']} minimization, "
            f"{result['failed_compilations']} failed) in {result['seconds']} s",
        ]
    )
