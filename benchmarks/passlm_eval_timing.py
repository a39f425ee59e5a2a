"""What a full `optserve eval passes` run would take, projected from a finished smaller run.

    python benchmarks/passlm_eval_timing.py [--results runs/passes_eval.json] [--functions 4941]
        [--out docs/bench/passlm_eval_timing.md]

Reads the run's results JSON (written by `optserve eval passes --json-out`), prints the wall time per function
of each method as measured there, and projects the wall time of `--functions` functions, per method and for
the whole run. Writes the same as a markdown section (the lead merges it into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from optserve.corpus.journal import write_atomic


def render(data: dict, functions: int, results_path: Path) -> str:
    meta, results = data["meta"], data["results"]
    run = meta["run"]
    measured = max(1, run["computed"] // max(1, len(meta["methods"])))  # functions this run computed
    per_function = run["seconds"] / measured
    lines = [
        "## Evaluation harness: wall time per function and method",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"`python benchmarks/passlm_eval_timing.py --results {results_path} --functions {functions}`, "
        f"from the run `{meta['command']}` ({meta['date']}; {meta['machine']}; model {meta['model_id']}, "
        f"backend {meta['backend']}; {results['functions']} functions).",
        "",
        f"| method | generate s | compile s | total s median | p90 | max | projected h for {functions} |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method, timing in results["timings"].items():
        mean_total = timing["generate_s"] + timing["compile_s"]
        lines.append(
            f"| {method} | {timing['generate_s']:.3f} | {timing['compile_s']:.3f} "
            f"| {timing['total_median_s']:.3f} | {timing['total_p90_s']:.3f} | {timing['total_max_s']:.3f} "
            f"| {functions * mean_total / 3600:.2f} |"
        )
    lines += [
        "",
        f"Whole run: {run['seconds']:.0f} s for {measured} functions = {per_function:.1f} s per function "
        f"with every method (compilation overlaps the next function's generation); {functions} functions: "
        f"{functions * per_function / 3600:.1f} h on this machine. Per-method projections run that method "
        "alone (generate + compile, no overlap).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("runs/passes_eval.json"))
    parser.add_argument("--functions", type=int, default=4941, help="project to this many functions")
    parser.add_argument("--out", type=Path, default=Path("docs/bench/passlm_eval_timing.md"))
    args = parser.parse_args()
    data = json.loads(args.results.read_text())
    if not data["meta"]["run"]["computed"]:
        raise SystemExit("that run computed nothing (all from the journal): its wall time says nothing")
    text = render(data, args.functions, args.results)
    print(text)
    write_atomic(args.out, text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
