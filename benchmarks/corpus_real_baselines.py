"""Baselines on the real test split at equal compile budgets: random lists, the coreset, local search, labels.

For each sampled test example (functions: both objectives; units: .text size) and budget b in BUDGETS:
  random@b     the best of the first b random pass lists (fixed seed per example; autotune.random_pass_list)
  coreset@b    the best of the coreset's first b lists for the objective (models/coreset/coreset.json)
  search@b     compiler.autotune.local_search from scratch (no seed lists) with b candidate compiles
  labels       the committed label of the example (local search from the coreset, budget 300..1000), if any
each with the -Oz floor (min with -Oz: what the service answers) and without it (the lists alone). The number
reported is the share of the summed -Oz cost saved, as in the thesis' tables (docs/bench/corpus_real.md).

    python benchmarks/corpus_real_baselines.py --functions 150 --units 10 --workers 2
    python benchmarks/corpus_real_baselines.py --functions 0 --units 100 --methods random,coreset

A count of 0 leaves that granularity out; --methods measures only the methods named (local search from
scratch costs about as many compiles as the other two together).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import time
from datetime import date
from pathlib import Path

from tqdm import tqdm

from optserve.compiler.autotune import local_search, random_pass_list
from optserve.compiler.pipeline import OZ
from optserve.compiler.workers import CompilerPool
from optserve.corpus.journal import read_jsonl
from optserve.corpus.label_store import stored_labels
from optserve.corpus.real_corpus import RealCorpusLayout
from optserve.engine.coreset import Coreset

BUDGETS = (1, 3, 10, 30, 100)
METHODS = ("random", "coreset", "search")


def sample(root: Path, granularity: str, count: int) -> list[dict]:
    """`count` test examples, spread over the test packages, in a fixed (hash) order."""
    corpus = RealCorpusLayout(root).corpus(granularity)
    examples = [e for shard in corpus.shards(("test",)) for e in read_jsonl(shard)]
    examples.sort(key=lambda e: hashlib.sha256(e["id"].encode()).hexdigest())
    return examples[:count]


def prefix_best(costs: list[int | None], budget: int) -> int | None:
    valid = [c for c in costs[:budget] if c is not None]
    return min(valid) if valid else None


def measure(
    example: dict, objective: str, coreset: Coreset, pool: CompilerPool, methods: tuple[str, ...] = METHODS
) -> dict:
    ir = example["ir"]
    oz, _unoptimized = (e.cost for e in pool.evaluate(ir, [OZ, ()], objective))
    row = {"oz": oz, **{method: {} for method in methods}}
    if "random" in methods:
        rng = random.Random(int(example["id"][:8], 16))
        random_lists = [random_pass_list(rng, 8) for _ in range(max(BUDGETS))]
        random_costs = [e.cost for e in pool.evaluate(ir, random_lists, objective)]
        row["random"] = {budget: prefix_best(random_costs, budget) for budget in BUDGETS}
    if "coreset" in methods:
        coreset_lists = list(coreset.first(objective, max(BUDGETS)))
        coreset_costs = [e.cost for e in pool.evaluate(ir, coreset_lists, objective)] if coreset_lists else []
        row["coreset"] = {b: prefix_best(coreset_costs, b) if coreset_costs else None for b in BUDGETS}
    if "search" in methods:
        for budget in BUDGETS:
            result = local_search(ir, budget=budget + 2, objective=objective, seed=1, pool=pool, top_k=3)
            # local_search keeps -Oz among its candidates; without the floor, its best non -Oz list counts
            row["search"][budget] = result.best_cost if result.best_pass_list != OZ else _second(result)
    return row


def _second(result) -> int | None:
    others = [cost for cost, pass_list in result.top if pass_list != OZ]
    return others[0] if others else None


def saved(rows: list[dict], method: str, budget: int, floor: bool) -> float | None:
    oz_total = best_total = 0
    for row in rows:
        best = row[method][budget]
        if best is None and not floor:
            return None  # a list failed everywhere: no figure without the floor
        best = row["oz"] if best is None else (min(best, row["oz"]) if floor else best)
        oz_total += row["oz"]
        best_total += best
    return 100.0 * (oz_total - best_total) / oz_total if oz_total else None


def labels_saved(rows: list[dict]) -> tuple[float | None, int]:
    labelled = [r for r in rows if r.get("label") is not None]
    if not labelled:
        return None, 0
    oz = sum(r["label"]["oz"] for r in labelled)
    return 100.0 * (oz - sum(r["label"]["best"] for r in labelled)) / oz, len(labelled)


def table(title: str, rows: list[dict], methods: tuple[str, ...] = METHODS) -> str:
    lines = [f"### {title} ({len(rows)} examples)", ""]
    lines.append("| method | " + " | ".join(f"@{b} floor / no floor" for b in BUDGETS) + " |")
    lines.append("|---" * (len(BUDGETS) + 1) + "|")
    for method in methods:
        cells = []
        for budget in BUDGETS:
            with_floor, without = saved(rows, method, budget, True), saved(rows, method, budget, False)
            cells.append(f"{_pct(with_floor)} / {_pct(without)}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    label_figure, labelled = labels_saved(rows)
    if labelled:
        same = [r for r in rows if r.get("label") is not None]
        budgets = sorted({r["label"]["budget"] for r in same})
        top = max(BUDGETS)
        others = ", ".join(f"{m}@{top} {_pct(saved(same, m, top, True))}" for m in methods if m != "search")
        lines += [
            "",
            f"On the {labelled} of them with a committed label (local search from the coreset, "
            f"budget {budgets}): labels **{_pct(label_figure)}**, {others} (with the floor).",
        ]
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--store", type=Path, default=Path("data/labels/real"))
    parser.add_argument("--coreset", type=Path, default=Path("models/coreset/coreset.json"))
    parser.add_argument("--functions", type=int, default=150)
    parser.add_argument("--units", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: " + ", ".join(METHODS))
    parser.add_argument("--out", type=Path, default=Path("docs/bench/corpus_real.md"))
    parser.add_argument("--json", type=Path, help="also write the per-example rows here")
    parser.add_argument("--from-json", type=Path, help="only re-render the tables of an earlier --json")
    args = parser.parse_args(argv)
    asked = {m.strip() for m in args.methods.split(",") if m.strip()}
    if not asked or asked - set(METHODS):
        parser.error(f"--methods: choose from {', '.join(METHODS)} (got {args.methods!r})")
    args.methods = tuple(m for m in METHODS if m in asked)  # the tables' order

    coreset = Coreset.load(args.coreset)
    if args.from_json:  # re-render a run's rows (same header fields are taken from the arguments)
        dump = json.loads(args.from_json.read_text())
        _write(args, coreset, dump, float(dump.pop("_seconds", 0)))
        return 0
    plan = [("functions", "text_size", args.functions), ("functions", "instruction_count", args.functions),
            ("units", "text_size", args.units)]  # fmt: skip
    plan = [step for step in plan if step[2] > 0]
    started = time.monotonic()
    dump = {}
    with CompilerPool(args.workers, timeout_s=120) as pool:
        for granularity, objective, count in plan:
            labels = stored_labels(args.store, granularity).get(objective, {})
            rows = []
            examples = sample(args.root, granularity, count)
            for example in tqdm(examples, desc=f"{granularity} {objective}"):
                row = measure(example, objective, coreset, pool, args.methods)
                row["label"] = labels.get(example["id"])
                rows.append(row)
            packages = sorted({e["package"] for e in examples})
            dump[f"{granularity}, {objective}, test packages {', '.join(packages)}"] = rows
    seconds = time.monotonic() - started
    if args.json:
        args.json.write_text(json.dumps({**dump, "_seconds": seconds}))
    _write(args, coreset, dump, seconds)
    return 0


def _write(args, coreset: Coreset, dump: dict[str, list[dict]], seconds: float) -> None:
    header = (
        "# Real test split: random lists, coreset, local search and labels at equal compile budgets\n\n"
        f"Machine: {platform.node()} ({platform.processor() or platform.machine()}), {args.workers} compile "
        f"workers; date {date.today()}; {seconds:.0f} s. Coreset {coreset.version} "
        f"({', '.join(f'{o}: {len(v)} lists' for o, v in coreset.lists.items())}).\n"
        f"Command: `python benchmarks/corpus_real_baselines.py --functions {args.functions} "
        f"--units {args.units} --workers {args.workers}"
        + ("" if args.methods == METHODS else f" --methods {','.join(args.methods)}")
        + "`\n\n"
        "Share of the summed -Oz cost saved (higher is better), with the -Oz floor / without it. A budget is "
        "the number of candidate lists compiled besides -Oz.\n\n"
    )
    sections = [table(title, _int_budgets(rows, args.methods), args.methods) for title, rows in dump.items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(header + "\n".join(sections))
    print(args.out.read_text())


def _int_budgets(rows: list[dict], methods: tuple[str, ...]) -> list[dict]:
    """JSON turns the budget keys into strings; the tables index them by int."""
    return [{**r, **{m: {int(b): c for b, c in r[m].items()} for m in methods}} for r in rows]


if __name__ == "__main__":
    raise SystemExit(main())
