"""Benchmark of the compiler core: candidate evaluations per second per core, -Oz time, and the autotuner's
improvement over -Oz at several budgets on real functions, for both objectives.

    python benchmarks/compiler_bench.py --functions data/corpus/functions/gcc-torture/test \\
        --processes 16 --budgets 100 1000 --json-out runs/compiler_bench.json --doc docs/bench/compiler.md

Functions are per-function modules (*.ll) from a directory, sorted by file name. Each phase prints what it
measured; --json-out keeps the raw numbers (written after every phase, so a run cut short keeps what it
finished), --doc writes the markdown section. `--from-json A.json [B.json ...]` renders the doc from earlier
runs (e.g. one here and one on a 16-core machine) without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import llvmlite

from optserve.compiler.autotune import autotune, random_pass_list
from optserve.compiler.cost import Objective
from optserve.compiler.ir import instruction_count
from optserve.compiler.pipeline import OZ, evaluate
from optserve.compiler.workers import CompilerPool

OBJECTIVES = [str(objective) for objective in Objective]


def load_functions(directory: Path, limit: int | None) -> list[tuple[str, str]]:
    files = sorted(directory.glob("*.ll"))[:limit]
    if not files:
        sys.exit(f"no *.ll files in {directory}")
    return [(path.name, path.read_text()) for path in files]


def provenance(manifest: Path | None) -> dict[str, str]:
    """id16 (the corpus file name) -> 'source file: function', from the corpus manifest when present."""
    if manifest is None or not manifest.exists():
        return {}
    rows = [line.split("\t") for line in manifest.read_text().splitlines()[1:]]
    return {row[0][:16]: f"{row[3].rsplit('/', 1)[-1]}: {row[4]}" for row in rows if len(row) >= 5}


def function_name(ir: str) -> str:
    define = next(line for line in ir.splitlines() if line.startswith("define "))
    return define.split("@", 1)[1].split("(", 1)[0]


def machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo")
    models = [line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
    cpu = models[0].split(":", 1)[1].strip() if models else platform.processor() or "unknown"
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "llvmlite": llvmlite.__version__,
        "date": subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip(),
        "load_average": os.getloadavg()[0],
    }


def measure_single_core(functions, candidates_per_objective: int) -> dict:
    """In-process evaluations of random pass lists (length 1-8, optional meta flag) over the functions."""
    rng = random.Random(0)
    result = {}
    for objective in OBJECTIVES:
        started = time.perf_counter()
        cpu_started = time.process_time()
        for index in range(candidates_per_objective):
            _, ir = functions[index % len(functions)]
            evaluate(ir, random_pass_list(rng, 8), objective)
        wall = time.perf_counter() - started
        result[objective] = {
            "candidates": candidates_per_objective,
            "seconds": wall,
            "cpu_seconds": time.process_time() - cpu_started,
            "evaluations_per_second": candidates_per_objective / wall,
        }
        print(f"single core, {objective}: {candidates_per_objective / wall:.0f} evaluations/s", flush=True)
    return result


def measure_oz(functions) -> dict:
    result = {}
    for objective in OBJECTIVES:
        times = []
        for _, ir in functions:
            started = time.perf_counter()
            evaluation = evaluate(ir, OZ, objective)
            times.append(time.perf_counter() - started)
            assert evaluation.ok, evaluation.error
        result[objective] = {
            "functions": len(times),
            "mean_ms": 1000 * statistics.fmean(times),
            "median_ms": 1000 * statistics.median(times),
            "p95_ms": 1000 * sorted(times)[int(0.95 * (len(times) - 1))],
            "max_ms": 1000 * max(times),
        }
        print(f"-Oz ({objective}): mean {result[objective]['mean_ms']:.2f} ms per function", flush=True)
    return result


def measure_pool(functions, processes: int, candidates_per_objective: int) -> dict:
    """The same random candidates through a CompilerPool of `processes` workers (IPC included)."""
    rng = random.Random(1)
    result = {}
    with CompilerPool(processes, timeout_s=60) as pool:
        for objective in OBJECTIVES:
            per_function = max(1, candidates_per_objective // len(functions))
            batches = [(ir, [random_pass_list(rng, 8) for _ in range(per_function)]) for _, ir in functions]

            def run(batch, objective=objective):
                return pool.evaluate(batch[0], batch[1], objective)

            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=4) as threads:
                evaluated = sum(len(r) for r in threads.map(run, batches))
            wall = time.perf_counter() - started
            result[objective] = {
                "processes": processes,
                "candidates": evaluated,
                "seconds": wall,
                "evaluations_per_second": evaluated / wall,
                "evaluations_per_second_per_core": evaluated / wall / processes,
            }
            print(
                f"pool of {processes}, {objective}: {evaluated / wall:.0f} evaluations/s "
                f"({evaluated / wall / processes:.0f} per core)",
                flush=True,
            )
    return result


def measure_autotune(functions, processes, budget: int, objective: str, concurrent: int, origins) -> dict:
    """Autotune every function (seed 0); concurrent searches share one pool of `processes` workers."""
    with CompilerPool(processes, timeout_s=60) as pool:

        def tune(named):
            name, ir = named
            result = autotune(ir, budget=budget, objective=objective, seed=0, pool=pool)
            return {
                "file": name,
                "function": function_name(ir),
                "instructions": instruction_count(ir),
                "origin": origins.get(name.removesuffix(".ll"), ""),
                "unoptimized": result.unoptimized_cost,
                "oz": result.oz_cost,
                "best": result.best_cost,
                "best_pass_list": list(result.best_pass_list),
                "compilations": result.compilations,
                "failed": result.failed_compilations,
                "seconds": result.seconds,
            }

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrent) as threads:
            rows = list(threads.map(tune, functions))
        wall = time.perf_counter() - started
    summary = summarize(rows)
    summary.update(budget=budget, objective=objective, processes=processes, seconds=wall, rows=rows)
    print(
        f"autotune budget {budget}, {objective}: {summary['total_improvement_percent']:.2f}% below -Oz "
        f"in total, mean {summary['mean_improvement_percent']:.2f}% per function, "
        f"{summary['improved']}/{len(rows)} improved, {summary['compilations']} compilations in {wall:.0f} s",
        flush=True,
    )
    return summary


def summarize(rows) -> dict:
    oz = sum(row["oz"] for row in rows)
    best = sum(row["best"] for row in rows)
    # A function can cost 0 at -Oz (e.g. its body folds to `unreachable`, which emits no code): no saving.
    savings = [(r["oz"] - r["best"]) / r["oz"] if r["oz"] else 0.0 for r in rows]
    return {
        "functions": len(rows),
        "total_improvement_percent": 100 * (oz - best) / oz,
        "mean_improvement_percent": 100 * statistics.fmean(savings),
        "improved": sum(row["best"] < row["oz"] for row in rows),
        "best_is_oz": sum(tuple(row["best_pass_list"]) == OZ for row in rows),
        "compilations": sum(row["compilations"] for row in rows),
        "failed": sum(row["failed"] for row in rows),
        "max_improvement_percent": 100 * max(savings),
    }


def render(runs: list[dict], command: str) -> str:
    lines = ["## Compiler core (optserve.compiler)", ""]
    for run in runs:
        m = run["machine"]
        lines += [
            f"### {m['cores']}-core machine: {m['cpu']}",
            "",
            f"- Date: {m['date']}; Python {m['python']}, llvmlite {m['llvmlite']} (LLVM 20.1.8); "
            f"load average at start {m['load_average']:.1f}",
            f"- Command: `{run['command']}`",
            f"- Functions: {run['functions']} per-function modules from `{run['functions_dir']}`",
            "",
        ]
        if "single_core" in run:
            lines += ["| measurement | instruction_count | text_size |", "|---|---:|---:|"]
            single = run["single_core"]
            lines.append(
                "| evaluations/s, one process (in-process `evaluate`) | "
                + " | ".join(f"{single[o]['evaluations_per_second']:.0f}" for o in OBJECTIVES)
                + " |"
            )
            if "pool" in run:
                pool = run["pool"]
                processes = pool[OBJECTIVES[0]]["processes"]
                lines.append(
                    f"| evaluations/s, CompilerPool of {processes} | "
                    + " | ".join(f"{pool[o]['evaluations_per_second']:.0f}" for o in OBJECTIVES)
                    + " |"
                )
                lines.append(
                    "| evaluations/s per core, pool | "
                    + " | ".join(f"{pool[o]['evaluations_per_second_per_core']:.0f}" for o in OBJECTIVES)
                    + " |"
                )
            if "oz" in run:
                oz = run["oz"]
                lines.append(
                    "| -Oz time per function, mean / median / p95 (ms) | "
                    + " | ".join(
                        f"{oz[o]['mean_ms']:.2f} / {oz[o]['median_ms']:.2f} / {oz[o]['p95_ms']:.2f}"
                        for o in OBJECTIVES
                    )
                    + " |"
                )
            lines.append("")
        if run.get("autotune"):
            lines += [
                "Autotuner (random search + minimization, seed 0, -Oz floor), improvement over -Oz:",
                "",
                "| objective | budget | functions | total saved vs -Oz | mean per function | max | improved "
                "| best = -Oz | compilations | failed | wall s |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for entry in run["autotune"]:
                lines.append(
                    f"| {entry['objective']} | {entry['budget']} | {entry['functions']} | "
                    f"{entry['total_improvement_percent']:.2f}% | {entry['mean_improvement_percent']:.2f}% | "
                    f"{entry['max_improvement_percent']:.1f}% | {entry['improved']} | "
                    f"{entry['best_is_oz']} | "
                    f"{entry['compilations']} | {entry['failed']} | {entry['seconds']:.0f} |"
                )
            lines.append("")
            rows = run["autotune"][0]["rows"]
            lines += [
                "<details><summary>The functions (gcc.c-torture file: function, instructions at -O0)"
                "</summary>",
                "",
                ", ".join(f"`{row['origin'] or row['function']}` ({row['instructions']})" for row in rows),
                "",
                "</details>",
                "",
            ]
    lines += [
        "Notes:",
        "",
        "- Functions: the corpus' test split of gcc.c-torture functions (clang-19 -O0 "
        "-disable-O0-optnone, split with `split_functions`, normalized; see docs/bench/corpus.md). "
        "Normalized modules carry no function attributes, so codegen uses the target's default CPU.",
        "- An evaluation parses the module, runs the pass list, verifies and measures (instruction count; "
        "or codegen and the object file's code size). Random lists: an optional meta flag, then 1-8 passes.",
        "- Improvement = (cost at -Oz - best cost) / cost at -Oz; 'total' sums costs over all functions, "
        "'mean' averages the per-function fractions. Every best cost is a real compilation result.",
        "- Large single-function gains come from -Oz doing size-increasing work on -O0 IR: without "
        "`minsize`/`optsize` attributes (clang adds them only when it compiles at -Oz itself) the -Oz "
        "pipeline still fully unrolls constant-trip loops (e.g. loop-2e.c: f; `opt-19 -passes='default<Oz>'` "
        "gives the same count), and for instruction count -O2's SLP vectorizer merges scalar code.",
        "- 'failed' candidates are real LLVM aborts (assertion 'Loops must remain in LCSSA form!' after "
        "sroa then loop-reduce): the worker died, the candidate got an error, the pool replaced the worker.",
        "",
    ]
    lines.append(f"Rendered by `{command}`.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=Path, default=Path("data/corpus/functions/gcc-torture/test"))
    parser.add_argument("--manifest", type=Path, default=Path("data/corpus/manifest.tsv"), help="provenance")
    parser.add_argument("--limit", type=int, default=None, help="use the first N functions")
    parser.add_argument("--processes", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--candidates", type=int, default=2000, help="random candidates per throughput test")
    parser.add_argument("--budgets", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--concurrent", type=int, default=4, help="functions autotuned at once (shared pool)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--doc", type=Path, default=None, help="write the markdown section here")
    parser.add_argument("--from-json", type=Path, nargs="*", default=None, help="render earlier runs only")
    args = parser.parse_args()
    command = "python " + " ".join(sys.argv)

    if args.from_json:
        runs = [json.loads(path.read_text()) for path in args.from_json]
    else:
        functions = load_functions(args.functions, args.limit)
        origins = provenance(args.manifest)
        run = {
            "machine": machine(),
            "command": command,
            "functions": len(functions),
            "functions_dir": str(args.functions),
        }
        print(f"{len(functions)} functions from {args.functions}; {run['machine']}", flush=True)

        def save() -> None:
            if args.json_out:
                args.json_out.parent.mkdir(parents=True, exist_ok=True)
                args.json_out.write_text(json.dumps(run, indent=1))

        if not args.skip_throughput:
            run["single_core"] = measure_single_core(functions, args.candidates)
            save()
            run["oz"] = measure_oz(functions)
            save()
            run["pool"] = measure_pool(functions, args.processes, args.candidates * args.processes)
            save()
        run["autotune"] = []
        for budget in args.budgets:
            for objective in OBJECTIVES:
                run["autotune"].append(
                    measure_autotune(functions, args.processes, budget, objective, args.concurrent, origins)
                )
                save()
        runs = [run]
    if args.doc:
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(render(runs, command))
        print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
