"""Do the model's samples make the tuner's search cheap? Compiles to reach 95% of a 1,000-compile search's
saving, with and without the model's priority samples as seeds.

    python -m optserve.passlm.evaluation.tuner_seeds --model-dir DIR --corpus CORPUS --split test \
        --objective text_size --budget 1000 --samples 10 --workers 16 --device cuda \
        --json-out R.json --report R.md

For each held-out function, two searches run exactly as `optserve tune` runs them (`tuning.tune.search_task`:
`local_search` of the project, seed 0, one compiler process per task, seeds from `tuning.tune.search_plan`):
  - **coreset**: -Oz and the coreset's first `CORESET_SEEDS` lists (the seeds `optserve tune` uses);
  - **model**: the same, then the model's priority samples (PS@`--samples`, the engine as served) of that
    function, so the search compiles them right after the coreset's.
Every compilation's cost is recorded in order (the search's -O0 and -Oz baselines, its seeds, its batches and
the minimization of its best list). Best cost so far at compile k is the cheapest candidate among the first k
(-Oz included; -O0 is no answer). A function's targets are 95% of the saving (-Oz cost - best cost) that the
coreset-seeded search reaches at the budget (the search `optserve tune` runs) and 95% of the better of the two
searches' savings (the model's samples can lead a search further); compiles-to-target is the first k whose
saving reaches it. A function with no saving to reach is left out of that target's rows. Searches run in a
process pool, one compiler process each (no Ray: the lent host has none).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from optserve.objectives import OBJECTIVE_NAMES, Objective

COMMAND = "python -m optserve.passlm.evaluation.tuner_seeds"
TARGET_SHARE = 0.95
WITHIN = 100  # a cheap search: one that reaches the target within this many compiles
CURVE_AT = (2, 12, 22, 50, 100, 200, 500, 1000)  # compiles at which the summed saving is reported
VARIANTS = ("coreset", "model")
TARGETS = ("coreset_search", "best_search")  # whose saving the 95% target is of (see `targets`)


# --- metrics (pure) ---------------------------------------------------------------------------------------


def best_so_far(trace: Sequence[int | None]) -> list[int]:
    """Best cost after each compile: trace[0] is -O0 (no answer), trace[1] -Oz (the floor)."""
    best, curve = None, []
    for index, cost in enumerate(trace):
        if index > 0 and cost is not None and (best is None or cost < best):
            best = cost
        curve.append(best if best is not None else trace[0])
    return curve


def compiles_to_reach(trace: Sequence[int | None], oz: int, target_saving: float) -> int | None:
    """The first compile count k (1-based) whose best-so-far saving over -Oz reaches `target_saving`."""
    for index, best in enumerate(best_so_far(trace)):
        if index > 0 and oz - best >= target_saving:
            return index + 1
    return None


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per variant and target: compiles to the target (median, mean, share within WITHIN); per variant the
    summed saving at CURVE_AT compiles and at the end."""
    searched = [r for r in records if all(v in r["searches"] for v in VARIANTS)]
    oz_total = sum(r["oz"] for r in searched)
    summary: dict[str, Any] = {
        "functions": len(searched),
        "with_model_seeds": sum(bool(r["model_lists"]) for r in searched),
        "oz_total": oz_total,
        "targets": {},
        "variants": {},
    }
    for target in TARGETS:
        with_target = [r for r in searched if r["targets"][target] > 0]
        rows = {"with_target": len(with_target), "no_saving_to_reach": len(searched) - len(with_target)}
        for variant in VARIANTS:
            reached = [r["searches"][variant]["compiles_to"][target] for r in with_target]
            found = [k for k in reached if k is not None]
            within = len([k for k in found if k <= WITHIN])
            # A function that never reaches the target counts at the compiles its search made, in the mean.
            counted = [
                k if k is not None else r["searches"][variant]["compilations"]
                for k, r in zip(reached, with_target, strict=True)
            ]
            rows[variant] = {
                "reached": len(found),
                "median": statistics.median(counted) if counted else None,
                "mean": round(statistics.fmean(counted), 1) if counted else None,
                f"within_{WITHIN}": within,
                f"share_within_{WITHIN}": round(within / len(with_target), 4) if with_target else None,
            }
        summary["targets"][target] = rows
    for variant in VARIANTS:
        searches = [r["searches"][variant] for r in searched]
        curves = {str(k): sum(r["oz"] - _at(r["searches"][variant]["best_so_far"], k) for r in searched)
                  for k in CURVE_AT}  # fmt: skip
        summary["variants"][variant] = {
            "saved_at": {k: round(v / oz_total, 5) if oz_total else None for k, v in curves.items()},
            "final_saved": round(
                sum(r["oz"] - s["best_cost"] for r, s in zip(searched, searches, strict=True)) / oz_total, 5
            )
            if oz_total
            else None,  # fmt: skip
            "compilations_mean": round(statistics.fmean(s["compilations"] for s in searches), 1)
            if searches
            else None,
        }
    return summary


def _at(curve: Sequence[int], k: int) -> int:
    return curve[min(k, len(curve)) - 1]


# --- the searches (process pool) --------------------------------------------------------------------------


class _RecordingPool:
    """The task's CompilerPool, recording every compiled candidate's cost in order."""

    def __init__(self, pool) -> None:
        self.pool = pool
        self.trace: list[int | None] = []

    def evaluate(self, ir, pass_lists, objective):
        evaluations = self.pool.evaluate(ir, pass_lists, objective)
        self.trace.extend(e.cost for e in evaluations)
        return evaluations

    def __getattr__(self, name):
        return getattr(self.pool, name)


def _start_worker(candidate_timeout_s: float, memory_mb: int | None) -> None:
    from optserve.compiler.workers import CompilerPool
    from optserve.tuning import tune

    tune._POOL = _RecordingPool(CompilerPool(1, candidate_timeout_s, memory_limit_mb=memory_mb))


def _search(function_id: str, variant: str, ir: str, plan) -> tuple[str, str, dict[str, Any]]:
    """One search as `optserve tune` runs it, with the costs of its compiles in order."""
    from optserve.tuning import tune

    recorder = tune._POOL
    recorder.trace = []
    started = time.perf_counter()
    result, cpu_s = tune.search_task(ir, plan)
    return (
        function_id,
        variant,
        {
            "trace": list(recorder.trace),
            "best_cost": result.best_cost,
            "best_pass_list": list(result.best_pass_list),
            "compilations": result.compilations,
            "failed": result.failed_compilations,
            "seconds": round(time.perf_counter() - started, 3),
            "compiler_cpu_s": round(cpu_s, 3),
        },
    )


# --- the model's samples ----------------------------------------------------------------------------------


async def _model_lists(config, functions, log, deadline: float) -> dict[str, dict[str, Any]]:
    """PS@n of each function (the engine as `optserve eval passes` runs it) until `deadline`."""
    from optserve.engine.engine import ModelEngine
    from optserve.passlm.evaluation.candidates import generate
    from optserve.passlm.evaluation.methods import Method

    options = {"device": config.device} if config.backend == "torch" else {}
    engine = ModelEngine.load(config.model_dir, config.backend, **options)
    method = Method("priority", "priority")
    out = {}
    try:
        for index, function in enumerate(functions):
            if time.monotonic() >= deadline:
                log(f"time limit: model samples of {index} of {len(functions)} functions")
                break
            generated = await generate(engine, function["ir"], method, config, config.max_samples)
            out[function["id"]] = {
                "lists": [list(p) for p in generated.pass_lists],
                "generate_s": round(generated.seconds, 4),
                "skipped": generated.skipped,
            }
            if (index + 1) % 50 == 0:
                log(f"model samples: {index + 1}/{len(functions)}")
    finally:
        await engine.close()
    return out


def run(
    config,
    functions: Sequence[dict[str, Any]],
    budget: int,
    workers: int,
    log=print,
    time_limit_s: float | None = None,
) -> list[dict[str, Any]]:
    """Both searches of every function; with `time_limit_s`, only the functions whose samples and searches
    finish within it (the searches running then finish; the rest are not started)."""
    from optserve.engine.coreset import Coreset
    from optserve.tuning.tune import search_plan

    coreset = list(Coreset.load(config.coreset_path).first(config.objective, 100))
    deadline = time.monotonic() + time_limit_s if time_limit_s else float("inf")
    started = time.perf_counter()
    samples = asyncio.run(_model_lists(config, functions, log, deadline))
    functions = [f for f in functions if f["id"] in samples]
    log(f"model samples of {len(functions)} functions in {time.perf_counter() - started:.1f} s")
    records = {
        f["id"]: {
            "id": f["id"],
            "package": f.get("package"),
            "function": f.get("function"),
            "model_lists": samples[f["id"]]["lists"],
            "model_skipped": samples[f["id"]]["skipped"],
            "generate_s": samples[f["id"]]["generate_s"],
            "searches": {},
        }
        for f in functions
    }
    plans = {
        "coreset": lambda f: search_plan(config.objective, budget, coreset, (), config.candidate_timeout_s),
        "model": lambda f: search_plan(
            config.objective, budget, coreset, samples[f["id"]]["lists"], config.candidate_timeout_s
        ),
    }
    started = time.perf_counter()
    # spawn: the engine has used the GPU in this process, and a forked child must not inherit that state.
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(config.candidate_timeout_s, 4096),
    ) as executor:
        longest_first = sorted(functions, key=lambda f: -len(f["ir"]))  # no straggler at the end
        futures = [
            executor.submit(_search, f["id"], variant, f["ir"], plans[variant](f))
            for f in longest_first
            for variant in VARIANTS
        ]
        handled: set = set()

        def collect(future) -> None:
            handled.add(future)
            try:
                function_id, variant, search = future.result()
            except Exception as err:  # a function that does not compile at -O0/-Oz: reported, not fatal
                log(f"search failed: {type(err).__name__}: {str(err)[:200]}")
                return
            records[function_id]["searches"][variant] = search
            if len(handled) % 50 == 0:
                log(f"searches: {len(handled)}/{len(futures)} in {time.perf_counter() - started:.0f} s")

        remaining = deadline - time.monotonic()
        try:
            for future in as_completed(futures, timeout=max(0.0, remaining) if remaining < 1e9 else None):
                collect(future)
        except TimeoutError:
            log("time limit: the searches not started are cancelled, the running ones finish")
            for future in futures:
                future.cancel()
            for future in as_completed([f for f in futures if f not in handled and not f.cancelled()]):
                collect(future)
    done = sum(len(r["searches"]) for r in records.values())
    log(f"{done} searches in {time.perf_counter() - started:.1f} s on {workers} processes")
    for record in records.values():
        measure(record)
    return list(records.values())


def measure(record: dict[str, Any]) -> None:
    """Best-so-far curves, the targets and the compiles each search takes to reach them."""
    searches = record["searches"]
    if "coreset" not in searches or not searches["coreset"]["trace"]:
        record["oz"], record["targets"] = 0, dict.fromkeys(TARGETS, 0)
        return
    oz = searches["coreset"]["trace"][1]
    record["oz"] = oz
    record["targets"] = targets(oz, {v: s["best_cost"] for v, s in searches.items()})
    for search in searches.values():
        search["best_so_far"] = best_so_far(search["trace"])
        search["compiles_to"] = {
            name: compiles_to_reach(search["trace"], oz, saving) if saving > 0 else None
            for name, saving in record["targets"].items()
        }


def targets(oz: int, best_costs: dict[str, int]) -> dict[str, float]:
    """95% of the coreset-seeded search's saving (the search `optserve tune` runs), and 95% of the
    better of the two searches' savings (the model's samples can lead the search somewhere better)."""
    saving = {variant: max(0, oz - cost) for variant, cost in best_costs.items()}
    return {
        "coreset_search": TARGET_SHARE * saving.get("coreset", 0),
        "best_search": TARGET_SHARE * max(saving.values(), default=0),
    }


# --- report -----------------------------------------------------------------------------------------------


def report(data: dict[str, Any]) -> str:
    meta, summary = data["meta"], data["summary"]
    lines = [
        "# Tuner seeds: compiles to 95% of the 1,000-compile search's saving, with and without the model",
        "",
        f"- Command: `{meta['command']}`",
        f"- Machine: {meta['machine']}; date {meta['date']}",
        f"- Model: `{meta['model_dir']}` ({meta['model_id']}, fingerprint {meta['model_fingerprint']}), "
        f"PS@{meta['samples']} (top-k {meta['top_k']}) on {meta['device']}",
        f"- Corpus: `{meta['corpus_dir']}`, split {meta['split']}, objective {meta['objective']}; "
        f"{summary['functions']} of {meta['functions_selected']} functions searched (time limit "
        f"{meta['time_limit_s']} s; the longest go first), {summary['with_model_seeds']} with model samples",
        f"- Searches: `tuning.tune.search_task` at budget {meta['budget']}, {meta['workers']} processes, "
        f"{meta['seconds']:.0f} s",
        "",
        f"| target: 95% of | seeds | reached | median compiles | mean | within {WITHIN} "
        f"| share within {WITHIN} |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    names = {"coreset": "-Oz + coreset@10 (today)", "model": f"+ model PS@{meta['samples']}"}
    target_names = {"coreset_search": "the coreset-seeded search's saving",
                    "best_search": "the better search's saving"}  # fmt: skip
    for target in TARGETS:
        rows = summary["targets"][target]
        for variant in VARIANTS:
            v = rows[variant]
            lines.append(
                f"| {target_names[target]} ({rows['with_target']} functions) | {names[variant]} | "
                f"{v['reached']} | {v['median']} | {v['mean']} | {v[f'within_{WITHIN}']} | "
                f"{_pct(v[f'share_within_{WITHIN}'])} |"
            )
    lines += ["", "Saved vs -Oz (summed) after k compiles:", ""]
    lines.append("| seeds | " + " | ".join(f"k={k}" for k in CURVE_AT) + " | end |")
    lines.append("|---|" + "---:|" * (len(CURVE_AT) + 1))
    for variant in VARIANTS:
        v = summary["variants"][variant]
        cells = [_pct(v["saved_at"][str(k)]) for k in CURVE_AT] + [_pct(v["final_saved"])]
        lines.append(f"| {names[variant]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Compiles count every distinct compilation of the search (-O0 and -Oz first, then the seeds, the "
        "search's batches and the minimization of its best list); the model's samples cost no compile to "
        "draw. Targets: 95% of the saving the coreset-seeded search reaches at the budget, or of the better "
        "of the two searches' savings; functions with no saving are left out of those rows; mean: a "
        "function that never reaches the target counts at its search's compiles. k=2: -Oz alone; "
        "k=12: -Oz + coreset@10.",
        "",
    ]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}%"


def main(argv: list[str] | None = None) -> int:
    from optserve.passlm.evaluation.journal import model_fingerprint
    from optserve.passlm.evaluation.methods import EvalConfig
    from optserve.passlm.evaluation.pipeline import select_functions
    from optserve.passlm.evaluation.report import machine_description, model_id

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True, help="labelled corpus (CorpusLayout)")
    parser.add_argument("--split", default="test", choices=("test", "val", "train"))
    parser.add_argument("--limit", type=int, help="the first N labelled functions of the split")
    parser.add_argument("--objective", default=Objective.TEXT_SIZE.value, choices=OBJECTIVE_NAMES)
    parser.add_argument("--budget", type=int, default=1000, help="compiles per search (optserve tune's)")
    parser.add_argument("--samples", type=int, default=10, help="the model's priority samples per function")
    parser.add_argument("--top-k", type=int, default=5, help="priority sampling: K")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="search processes")
    parser.add_argument("--backend", default="torch", choices=("torch", "vllm"))
    parser.add_argument("--device", default="cpu", help="torch backend: e.g. cuda")
    parser.add_argument("--coreset", type=Path, help="default: the bundled coreset")
    parser.add_argument("--json-out", type=Path, default=Path("runs/tuner_seeds.json"))
    parser.add_argument("--report", type=Path)
    parser.add_argument("--time-limit", type=float, help="seconds: only the functions searched within it")
    args = parser.parse_args(argv)
    if not (args.model_dir / "profile.json").exists():
        print(f"error: {args.model_dir} is not a model directory (no profile.json)", file=sys.stderr)
        return 2
    coreset = args.coreset or Path(__file__).resolve().parents[2] / "models" / "coreset" / "coreset.json"
    config = EvalConfig(
        model_dir=args.model_dir,
        corpus_dir=args.corpus,
        journal_path=args.json_out.with_suffix(".unused"),
        split=args.split,
        limit=args.limit,
        samples=(args.samples,),
        backend=args.backend,
        device=args.device,
        objective=args.objective,
        top_k=args.top_k,
        coreset_path=coreset,
    )
    try:
        functions = select_functions(config)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    records = run(config, functions, args.budget, args.workers, log, args.time_limit)
    data = {
        "meta": {
            "command": " ".join([COMMAND, *(argv or sys.argv[1:])]),
            "machine": machine_description(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "model_dir": str(args.model_dir),
            "model_id": model_id(args.model_dir),
            "model_fingerprint": model_fingerprint(args.model_dir),
            "device": args.device,
            "corpus_dir": str(args.corpus),
            "split": args.split,
            "objective": args.objective,
            "budget": args.budget,
            "samples": args.samples,
            "top_k": args.top_k,
            "workers": args.workers,
            "functions_selected": len(functions),
            "time_limit_s": args.time_limit,
            "coreset": str(coreset),
            "seconds": round(time.perf_counter() - started, 1),
        },
        "summary": summarize(records),
        "functions": records,
    }
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(data) + "\n")
    text = report(data)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
