"""`optserve eval looptune`: the LoopTune policy against the search baselines and numpy on a split."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from optserve.cli import add_json_flag, command_group, emit
from optserve.policies.methods import BASELINE_SEARCHES


def register(subparsers: argparse._SubParsersAction) -> None:
    targets = command_group(subparsers, "eval", help="evaluate a learned model on its benchmark split")
    looptune = targets.add_parser(
        "looptune", help="LoopTune policy vs searches and numpy (GFLOPS, time to schedule)"
    )
    looptune.add_argument("--split", default="test", choices=("test", "train"))
    looptune.add_argument("--search-shapes", type=int, default=20, help="benchmarks the searches run on")
    looptune.add_argument("--search-time", type=float, default=60.0, help="seconds per search (default 60)")
    looptune.add_argument(
        "--methods", default=",".join(BASELINE_SEARCHES), help="comma-separated searches ('' for none)"
    )
    looptune.add_argument(
        "--policy-shapes", type=int, default=None, help="benchmarks for the policy (default: the whole split)"
    )
    looptune.add_argument("--policy", default=None, help="policy.pt (default: the bundled models/looptune)")
    looptune.add_argument(
        "--parts", default="searches,policy", help="what to run (merge separate runs with --from-json)"
    )
    looptune.add_argument(
        "--rounds", type=int, default=5, help="interleaved timing rounds for what is compared (default 5)"
    )
    looptune.add_argument("--jobs", type=int, default=1, help="worker processes, each pinned to one core")
    looptune.add_argument("--first-core", type=int, default=0, help="pin workers to cores first-core..")
    looptune.add_argument("--out", default=None, help="write the markdown report here (plot beside it)")
    looptune.add_argument("--json-out", default="runs/looptune_eval.json", help="raw results")
    looptune.add_argument(
        "--from-json", default=None, help="render a report from saved results (comma-separated: merged)"
    )
    add_json_flag(looptune)
    looptune.set_defaults(handler=_eval_looptune)


def _eval_looptune(args: argparse.Namespace) -> int:
    from optserve.looptune_training.evaluate import EvalConfig, evaluate, merge, plot, report, summary

    tail = sys.argv[sys.argv.index("looptune") + 1 :] if "looptune" in sys.argv else []
    command = "optserve eval looptune " + " ".join(tail)
    if args.from_json:
        data = merge([json.loads(Path(p).read_text()) for p in args.from_json.split(",")])
        command = "; ".join(run.get("command", "") for run in data["meta"]["runs"])
    else:
        cfg = EvalConfig(
            split=args.split,
            search_shapes=args.search_shapes,
            search_time_s=args.search_time,
            methods=tuple(m for m in args.methods.split(",") if m),
            policy_shapes=args.policy_shapes,
            policy_path=args.policy,
            parts=tuple(p for p in args.parts.split(",") if p),
            rounds=args.rounds,
            jobs=args.jobs,
            first_core=args.first_core,
        )
        try:
            data = evaluate(cfg, progress=None if args.json else _progress)
        except ValueError as err:
            emit({"error": str(err)}, args.json)
            return 2
        data["meta"]["command"] = command
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(data, indent=1))
    plot_path = None
    if args.out:
        plot_path = str(Path(args.out).with_suffix(".png"))
        plot(data, plot_path)
        Path(args.out).write_text(report(data, command, plot_path))
    policy_shapes = sorted({r["shape"] for r in data["results"] if r["method"] == "policy"})
    result = {
        "meta": {k: v for k, v in data["meta"].items() if k != "search_sample"},
        "all": summary(data["results"], policy_shapes, searches=False),
        "search_sample": summary(data["results"], data["meta"]["search_sample"]),
    }
    emit(result, args.json, lambda _: report(data, command))
    return 0


def _progress(done: int, total: int, result: dict) -> None:
    gflops = result["gflops"]
    if isinstance(gflops, dict):  # a compare item: every method's result, re-timed together
        shown = ", ".join(f"{k} {v:.1f}" for k, v in gflops.items())
    else:
        shown = f"{gflops:.1f}"
    print(f"[{done}/{total}] {result['shape']} {result['method']}: {shown} GFLOPS", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run without the other areas' commands (the lent machine has only kernels/ and policies/)."""
    parser = argparse.ArgumentParser(prog="optserve")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
