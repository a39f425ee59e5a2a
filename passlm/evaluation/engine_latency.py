"""The inference engine's latency per sampling strategy on real functions: what benchmarks/engine_bench.py
(both backends on CPU), engine_ab.py (a backend against an earlier version of it) and engine_gpu_run.sh (the
torch backend on a lent GPU) measure alike.

The functions are clang-19 -O0 functions of a folder of C files (the repository's tests/data/c), small enough
for the model's context; each request runs from a cold cache, after one warm-up request, and its wall time
is its latency.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import statistics
import subprocess
import time
from pathlib import Path

from optserve.compiler.ir import normalize_ir, split_functions
from optserve.engine.interface import SamplingOptions, Strategy

CLANG = ["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-w", "-S"]
STRATEGIES = {
    "greedy": SamplingOptions(),
    "PS@10": SamplingOptions(strategy=Strategy.PRIORITY, samples=10),
    "PS@30": SamplingOptions(strategy=Strategy.PRIORITY, samples=30),
    "PPS@10 (4 heads)": SamplingOptions(strategy=Strategy.PRIORITY, samples=10, parallel=4),
    "PPS@30 (4 heads)": SamplingOptions(strategy=Strategy.PRIORITY, samples=30, parallel=4),
    "nucleus@10 T=1.2": SamplingOptions(strategy=Strategy.NUCLEUS, samples=10, temperature=1.2, top_p=0.95),
}


def strategies(predict_costs: bool) -> dict[str, SamplingOptions]:
    return {label: dataclasses.replace(o, predict_costs=predict_costs) for label, o in STRATEGIES.items()}


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with few requests, p99 is the slowest one)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


PARALLEL_PAIRS = [("PS@10", "PPS@10 (4 heads)"), ("PS@30", "PPS@30 (4 heads)")]


def small_functions(sources: Path, max_bytes: int, limit: int) -> list[tuple[str, str]]:
    """Up to `limit` functions of the C files in `sources` (clang-19 -O0) whose normalized IR is at most
    `max_bytes`, taken in turn from each file so that every program is represented."""
    per_source = []
    for source in sorted(sources.glob("*.c")):
        command = [*CLANG, str(source), "-o", "-"]
        module = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        functions = [(f"{source.stem}:{name}", ir) for name, ir in split_functions(module)]
        per_source.append([(name, ir) for name, ir in functions if len(normalize_ir(ir)) <= max_bytes])
    in_turn = [f for group in itertools.zip_longest(*per_source) for f in group if f is not None]
    return in_turn[:limit]


async def measure(engine, functions, reset_cache, predict_costs: bool) -> dict:
    """Per strategy: each function's request from a cold cache (`await reset_cache()` before each), its
    latency, model tokens computed and unique candidates; then parallel vs sequential priority sampling
    (speed-up and how many candidates both found)."""
    results = {}
    await engine.generate(functions[0][1], SamplingOptions())  # warm-up: first-call costs are not latency
    for label, options in strategies(predict_costs).items():
        load_before = load_average()
        runs = []
        for name, ir in functions:
            await reset_cache()
            started = time.perf_counter()
            generation = await engine.generate(ir, options)
            seconds = time.perf_counter() - started
            runs.append(
                {
                    "function": name,
                    "seconds": seconds,
                    "tokens_computed": generation.tokens_computed,
                    "prompt_tokens": len(engine.prompt_ids(ir)),
                    "candidates": [list(c.pass_list) for c in generation.candidates],
                }
            )
        latencies = [r["seconds"] for r in runs]
        unique = sum(len(r["candidates"]) for r in runs)
        tokens = sum(r["tokens_computed"] for r in runs)
        prompt = sum(r["prompt_tokens"] for r in runs)
        results[label] = {
            "runs": runs,
            "p50_s": statistics.median(latencies),
            "p99_s": percentile(latencies, 99),
            "max_s": max(latencies),
            "tokens_per_request": tokens / len(runs),
            "prompt_tokens_per_request": prompt / len(runs),
            "tokens_per_unique_sample": tokens / max(unique, 1),
            "unique_per_request": unique / len(runs),
            "load": f"{load_before} -> {load_average()}",
        }
        r = results[label]
        print(
            f"  {label:18s} p50 {r['p50_s'] * 1000:8.1f} ms  p99 {r['p99_s'] * 1000:8.1f} ms  "
            f"tokens/request {r['tokens_per_request']:7.1f} (prompt {r['prompt_tokens_per_request']:.0f})  "
            f"tokens/unique sample {r['tokens_per_unique_sample']:6.1f}  "
            f"unique/request {r['unique_per_request']:.1f}  load {r['load']}",
            flush=True,
        )
    for sequential, parallel in PARALLEL_PAIRS:
        overlaps = []
        for seq_run, par_run in zip(results[sequential]["runs"], results[parallel]["runs"], strict=True):
            seq = {tuple(c) for c in seq_run["candidates"]}
            par = {tuple(c) for c in par_run["candidates"]}
            overlaps.append(len(seq & par) / max(len(seq), 1))
        results[f"{parallel} vs {sequential}"] = {
            "speedup_p50": results[sequential]["p50_s"] / results[parallel]["p50_s"],
            "overlap_mean": statistics.mean(overlaps),
            "overlap_min": min(overlaps),
        }
        print(f"  {parallel} vs {sequential}: {results[f'{parallel} vs {sequential}']}", flush=True)
    return results
