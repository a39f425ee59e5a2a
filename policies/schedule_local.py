"""`optserve schedule-local`: search a loop schedule for a contraction on this machine and print it.

(`optserve schedule` is the client of a running service, registered by serve/cli.py.)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from optserve.cli import add_json_flag, emit
from optserve.policies.methods import DEFAULT_METHOD, SearchMethod


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "schedule-local", help="search a loop schedule for a tensor contraction here (JIT + timing)"
    )
    parser.add_argument("--einsum", required=True, help="e.g. 'C[m,n] += A[m,k] * B[k,n]'")
    parser.add_argument("--sizes", required=True, help="e.g. m=128,n=96,k=64")
    parser.add_argument(
        "--search",
        default=None,
        choices=[method.value for method in SearchMethod],
        help=f"search method (default {DEFAULT_METHOD}, as the service's)",
    )
    parser.add_argument(
        "--time-limit", type=float, default=None, help="search seconds (default: the service's default)"
    )
    parser.add_argument("--measure", action="store_true", help="also time the base schedule and the peak")
    parser.add_argument("--emit-ir", action="store_true", help="include the kernel's optimized LLVM IR")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads the kernel may run on (default: this machine's CPUs)",
    )
    parser.add_argument("--config", default=None, help="optserve YAML config (LoopTune limits)")
    add_json_flag(parser)
    parser.set_defaults(handler=_schedule)


def _schedule(args: argparse.Namespace) -> int:
    from optserve.config import load_settings
    from optserve.kernels.spec import SpecError, parse_sizes
    from optserve.policies.scheduler import schedule_contraction

    try:
        # No decision cache: a command run by hand asks for a search on this machine, now.
        result = schedule_contraction(
            args.einsum,
            parse_sizes(args.sizes),
            load_settings(args.config).looptune,
            method=args.search,
            time_limit_s=args.time_limit,
            measure=args.measure,
            emit_ir=args.emit_ir,
            threads=args.threads,
        )
    except SpecError as err:
        emit({"error": str(err)}, args.json)
        return 2
    emit(result.to_dict(), args.json, _render)
    return 0


def _render(result: Mapping[str, Any]) -> str:
    def number(value: float | None, unit: str = "") -> str:
        return "-" if value is None else f"{value:.1f}{unit}"

    lines = [
        f"{result['einsum']}   {', '.join(f'{k}={v}' for k, v in result['sizes'].items())}",
        f"method {result['method']}: {number(result['gflops'])} GFLOPS (base {number(result['base_gflops'])},"
        f" peak {number(result['peak_gflops'])}), searched {result['search_seconds']:.1f} s,"
        f" {result['evaluations']} schedules measured{', time limit hit' if result['timed_out'] else ''},"
        f" {result['threads']} thread(s)",
        f"actions: {' '.join(result['actions']) or '(none)'}",
        f"compile: {number(result['compile_ms'], ' ms')}",
        "",
        result["schedule"],
    ]
    if result.get("llvm_ir"):
        lines += ["", result["llvm_ir"]]
    return "\n".join(lines)
