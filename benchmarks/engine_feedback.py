"""Compiler-feedback retry vs priority sampling at an equal compile budget, on the test split.

    python benchmarks/engine_feedback.py --model-dir models/passformer --functions 100 \
        [--doc docs/bench/engine.md] [--json-out runs/engine_feedback.json]

For each of the first N labelled test functions (shard order; instruction-count objective), with budget B
compilations:
- PS@B: priority sampling, B candidates, all compiled (no feedback);
- FB@B: greedy (instruction counts decoded), then B-1 feedback rounds of one candidate each: the prompt
  carries the feedback of the previous round's candidate (`optserve.engine.feedback.build_feedback`), and
  the round compiles the first pass list the model ranks highest (priority sampling under the feedback
  prompt) that no earlier round compiled, so every round spends its compilation on a new list. Both methods
  run through the service's own loop, `optserve.engine.feedback.generate_with_feedback` (PS@B as its first
  round alone; FB@B with `feedback_options` and `per_round=1`), compiling on a `CompilerPool`. What greedy
  rounds with the loop's stopping rule (a round that adds nothing ends it) would run is reported too: how
  many rounds greedy decoding under feedback still gave a new list.
Priority sampling's first k samples do not depend on how many are asked for, and rounds are sequential, so
one run up to the largest budget gives every smaller budget as a prefix.

Improvement over -Oz as in the thesis: (sum of -Oz instruction counts - sum of best counts) / sum of -Oz,
without backup (a function's best candidate may be worse than -Oz) and with -Oz as backup (min with -Oz).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from optserve.compiler.cost import Objective
from optserve.compiler.workers import CompilerPool
from optserve.engine.feedback import generate_with_feedback
from optserve.engine.interface import SamplingOptions, Strategy

REPO = Path(__file__).resolve().parent.parent
OBJECTIVE = Objective.INSTRUCTION_COUNT
COMPILE_TIMEOUT_S = 60.0  # per candidate; test-suite functions compile in milliseconds


def test_functions(corpus: Path, limit: int) -> list[dict]:
    from optserve.corpus.label import iter_labelled
    from optserve.corpus.layout import CorpusLayout

    chosen = []
    for example in iter_labelled(CorpusLayout(corpus), ("test",)):
        label = example["labels"].get(OBJECTIVE.value)
        if label is None or label.get("best") is None:
            continue
        chosen.append({"id": example["id"], "ir": example["ir"], "oz": label["oz"], "best": label["best"]})
        if len(chosen) == limit:
            break
    return chosen


async def priority_costs(engine, pool: CompilerPool, ir: str, budget: int) -> list[int | None]:
    """Costs of PS@budget's candidates: the loop's first round, no feedback."""
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=budget, predict_costs=False)
    result = await generate_with_feedback(engine, pool, ir, options, 0, OBJECTIVE)
    return [evaluation.cost for _, evaluation in result.measured]


async def feedback_costs(engine, pool: CompilerPool, ir: str, budget: int) -> tuple[list[int | None], int]:
    """Costs of the candidates of 1 + (budget - 1) feedback rounds; and how many rounds greedy alone fills."""
    result = await generate_with_feedback(
        engine,
        pool,
        ir,
        SamplingOptions(predict_costs=True),
        budget - 1,
        OBJECTIVE,
        feedback_options=SamplingOptions(strategy=Strategy.PRIORITY, samples=budget, predict_costs=True),
        per_round=1,
    )
    compiled: set[tuple[str, ...]] = set()
    greedy_rounds = 0
    for round_ in result.rounds:
        if round_.generation.candidates[0].pass_list in compiled:
            break  # greedy rounds would have repeated a list here: the loop would stop
        greedy_rounds += 1
        compiled.update(candidate.pass_list for candidate, _ in round_.new)
    return [evaluation.cost for _, evaluation in result.measured], greedy_rounds


def summarize(functions: list[dict], costs: list[list[int | None]], budget: int) -> dict:
    total_oz = sum(f["oz"] for f in functions)
    no_backup = with_backup = 0
    improved = regressed = failed = 0
    for function, run in zip(functions, costs, strict=True):
        valid = [c for c in run[:budget] if c is not None]
        best = min(valid) if valid else None
        if best is None:
            failed += 1
            best_no_backup = function["oz"]  # nothing compiled: the service would fall back to -Oz
        else:
            best_no_backup = best
        no_backup += best_no_backup
        with_backup += min(best_no_backup, function["oz"])
        improved += best is not None and best < function["oz"]
        regressed += best is not None and best > function["oz"]
    return {
        "improvement_no_backup": (total_oz - no_backup) / total_oz,
        "improvement_with_backup": (total_oz - with_backup) / total_oz,
        "improved": improved,
        "regressed": regressed,
        "no_valid_candidate": failed,
        "compilations_mean": sum(min(len(run), budget) for run in costs) / len(costs),
    }


async def run_model(model_dir: Path, functions: list[dict], budgets: list[int]) -> dict:
    from optserve.engine.engine import ModelEngine

    engine = ModelEngine.load(model_dir, backend="torch")
    pool = CompilerPool(processes=1, timeout_s=COMPILE_TIMEOUT_S)
    largest = max(budgets)
    ps_runs, fb_runs, greedy_rounds = [], [], []
    started = time.monotonic()
    try:
        for index, function in enumerate(functions):
            ps_runs.append(await priority_costs(engine, pool, function["ir"], largest))
            fb, rounds = await feedback_costs(engine, pool, function["ir"], largest)
            fb_runs.append(fb)
            greedy_rounds.append(rounds)
            if (index + 1) % 20 == 0:
                print(f"  {index + 1} functions, {time.monotonic() - started:.0f} s", flush=True)
    finally:
        pool.close()
        await engine.close()
    results = {"model_id": engine.model_id, "seconds": time.monotonic() - started, "budgets": {}}
    results["budgets"]["1"] = {"greedy": summarize(functions, [r[:1] for r in fb_runs], 1)}
    for budget in budgets:
        results["budgets"][str(budget)] = {
            "priority": summarize(functions, ps_runs, budget),
            "feedback": summarize(functions, fb_runs, budget),
        }
    results["greedy_feedback_rounds_mean"] = sum(greedy_rounds) / len(greedy_rounds)
    results["greedy_feedback_rounds_hist"] = {str(k): greedy_rounds.count(k) for k in range(1, largest + 1)}
    results["ps_runs"], results["fb_runs"] = ps_runs, fb_runs
    return results


def render(report: dict) -> str:
    lines = [
        f"## Compiler-feedback retry vs priority sampling at equal compile budget ({report['title']})",
        "",
        f"- Date: {report['date']}; command: `{report['command']}`",
        f"- {report['functions']} test-split functions (first in shard order with an instruction-count "
        f"label); sum of -Oz instruction counts {report['total_oz']}, of the autotuner's labels "
        f"{report['total_best']} "
        f"({report['label_improvement'] * 100:.2f}% below -Oz: the ceiling).",
        "",
        "| model | budget | method | improvement over -Oz, no backup | with -Oz backup | improved | "
        "regressed | no valid candidate |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for model, results in report["models"].items():
        for budget, methods in results["budgets"].items():
            for method, s in methods.items():
                name = {
                    "greedy": "greedy",
                    "priority": f"PS@{budget}",
                    "feedback": f"greedy + {int(budget) - 1} feedback rounds",
                }[method]
                lines.append(
                    f"| {model} | {budget} | {name} | {s['improvement_no_backup'] * 100:.2f}% | "
                    f"{s['improvement_with_backup'] * 100:.2f}% | {s['improved']} | {s['regressed']} | "
                    f"{s['no_valid_candidate']} |"
                )
    lines.append("")
    for model, results in report["models"].items():
        lines.append(
            f"- {model}: rounds in which greedy decoding under feedback still gave a new list (what "
            f"`generate_with_feedback` with greedy would run): mean "
            f"{results['greedy_feedback_rounds_mean']:.2f} of {max(int(b) for b in results['budgets'])}, "
            f"histogram {results['greedy_feedback_rounds_hist']}; "
            f"{results['seconds']:.0f} s for all functions."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, nargs="+", default=[REPO / "models" / "passformer"])
    parser.add_argument("--corpus", type=Path, default=REPO / "data" / "corpus")
    parser.add_argument("--functions", type=int, default=100)
    parser.add_argument("--budgets", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--title", default="passformer-7m, torch backend, CPU")
    parser.add_argument("--json-out", type=Path, default=REPO / "runs" / "engine_feedback.json")
    parser.add_argument("--doc", type=Path, help="append the markdown section to this file")
    parser.add_argument("--from-json", type=Path, nargs="+", help="render from earlier runs (models merged)")
    args = parser.parse_args()
    if args.from_json:
        reports = [json.loads(p.read_text()) for p in args.from_json]
        report = reports[0]
        for other in reports[1:]:
            report["models"].update(other["models"])
            report["command"] += "; " + other["command"]
    else:
        functions = test_functions(args.corpus, args.functions)
        report = {
            "date": subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip(),
            "command": "python " + " ".join(sys.argv),
            "title": args.title,
            "functions": len(functions),
            "total_oz": sum(f["oz"] for f in functions),
            "total_best": sum(f["best"] for f in functions),
            "label_improvement": 1 - sum(f["best"] for f in functions) / sum(f["oz"] for f in functions),
            "models": {},
        }
        for model_dir in args.model_dir:
            print(f"{model_dir}:", flush=True)
            results = asyncio.run(run_model(model_dir, functions, args.budgets))
            name = f"{results['model_id']} ({model_dir.name})"
            report["models"][name] = results
            args.json_out.parent.mkdir(parents=True, exist_ok=True)
            args.json_out.write_text(json.dumps(report))
    markdown = render(report)
    print(markdown)
    if args.doc:
        with args.doc.open("a") as out:
            out.write("\n" + markdown)


if __name__ == "__main__":
    main()
