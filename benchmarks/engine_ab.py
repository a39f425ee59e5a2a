"""Paired A/B latency of the torch backend against an earlier version of it, in one process.

    git show 85feb3c:engine/torch_backend.py > /tmp/torch_backend_baseline.py
    python benchmarks/engine_ab.py --baseline /tmp/torch_backend_baseline.py --doc docs/bench/engine.md

On a shared machine the load changes from minute to minute, so two benchmark runs minutes apart do not compare
two versions fairly. Here both versions serve the same model in one process and take turns request by request
(baseline, current, baseline, ...): each pair sees the same load, and the median of the per-request ratios is
the speed-up. It also checks that both return the same candidates (pass lists, in order).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

from optserve.passlm.evaluation.engine_latency import load_average, percentile, small_functions, strategies

REPO = Path(__file__).resolve().parent.parent

LABELS = ("greedy", "PS@10", "PS@30")


def load_baseline(path: Path):
    spec = importlib.util.spec_from_file_location("torch_backend_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def compare(current, baseline, functions, predict_costs: bool) -> dict:
    options = strategies(predict_costs)
    results = {}
    for engine in (current, baseline):  # warm-up
        await engine.generate(functions[0][1], options["greedy"])
    for label in LABELS:
        times = {"baseline": [], "current": []}
        same = 0
        load_before = load_average()
        for _, ir in functions:
            answers = {}
            for name, engine in (("baseline", baseline), ("current", current)):
                started = time.perf_counter()
                generation = await engine.generate(ir, options[label])
                times[name].append(time.perf_counter() - started)
                answers[name] = [c.pass_list for c in generation.candidates]
            same += answers["baseline"] == answers["current"]
        ratios = [b / c for b, c in zip(times["baseline"], times["current"], strict=True)]
        results[label] = {
            "baseline_p50_s": statistics.median(times["baseline"]),
            "baseline_p99_s": percentile(times["baseline"], 99),
            "current_p50_s": statistics.median(times["current"]),
            "current_p99_s": percentile(times["current"], 99),
            "speedup_median": statistics.median(ratios),
            "same_candidates": f"{same}/{len(functions)}",
            "load": f"{load_before} -> {load_average()}",
        }
        print(f"  {label}: {results[label]}", flush=True)
    return results


def render(report: dict) -> str:
    lines = [
        "## Inference engine: paired A/B of the torch backend (current vs baseline, same process)",
        "",
        f"- Date: {report['date']}; command: `{report['command']}`; baseline: {report['baseline']}",
        f"- Model: `{report['model_id']}` ({report['model_dir']}); "
        f"{len(report['functions'])} functions: {', '.join(report['functions'])}; "
        f"instruction counts decoded: {report['predict_costs']}; 1 intra-op thread",
        "",
        "| strategy | baseline p50 / p99 (ms) | current p50 / p99 (ms) | speed-up (median of pairs) | "
        "same candidates | load during |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label in LABELS:
        r = report["results"][label]
        lines.append(
            f"| {label} | {r['baseline_p50_s'] * 1000:.0f} / {r['baseline_p99_s'] * 1000:.0f} | "
            f"{r['current_p50_s'] * 1000:.0f} / {r['current_p99_s'] * 1000:.0f} | "
            f"{r['speedup_median']:.2f}x | {r['same_candidates']} | {r['load']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="an earlier engine/torch_backend.py")
    parser.add_argument("--model-dir", type=Path, default=REPO / "data" / "engine" / "passformer-random")
    parser.add_argument("--functions", type=int, default=6)
    parser.add_argument("--predict-costs", action="store_true")
    parser.add_argument("--doc", type=Path, help="append the markdown section to this file")
    args = parser.parse_args()
    from optserve.engine.engine import ModelEngine

    current = ModelEngine.load(args.model_dir, backend="torch")
    baseline_decoder = load_baseline(args.baseline).TorchDecoder(args.model_dir)
    baseline = ModelEngine(args.model_dir, baseline_decoder, baseline_decoder.context_length)
    functions = small_functions(REPO / "tests" / "data" / "c", 2048, args.functions)
    report = {
        "date": subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip(),
        "command": "python " + " ".join(sys.argv),
        "baseline": str(args.baseline),
        "model_dir": str(
            args.model_dir.relative_to(REPO) if args.model_dir.is_relative_to(REPO) else args.model_dir
        ),
        "model_id": current.model_id,
        "functions": [name for name, _ in functions],
        "predict_costs": args.predict_costs,
        "results": asyncio.run(compare(current, baseline, functions, args.predict_costs)),
    }
    markdown = render(report)
    print(markdown)
    if args.doc:
        with args.doc.open("a") as out:
            out.write("\n" + markdown)


if __name__ == "__main__":
    main()
