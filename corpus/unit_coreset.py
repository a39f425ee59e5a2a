"""A coreset for the function modules of whole units: lists chosen on what units get, not on lone functions.

The served per-function candidate (compiler/unit_search.py) gives each function module of a unit (a function
with the static helpers only it calls) the best of -Oz and the coreset's first lists. The coreset
(corpus/coreset.py) was chosen on the function corpus, another population: on test units' modules its first 10
lists save 1.3-1.6% of `.text` where they save ~4% on isolated functions (docs/bench/unit_lists.md).

This measures a pool of lists on every function module of TRAIN units (real compiles, `.text`) and chooses
with the coreset's greedy coverage (`corpus.coreset.select`) over the coreset's own examples (the train
labels of functions and units) and the measured modules, each module weighing `--module-weight` labels.
The pool: the coreset's lists, the lists the committed unit labels' searches found best on at least three
train units, and the unit labels' own greedy choice. `held_out_check` prints, by package folds, what each
choice saves on modules of packages it did not see, beside the coreset's first lists.

Measured (docs/bench/unit_lists.md): chosen on 172 modules alone the lists do worse on packages left out than
the coreset; with the labels as a prior about as well (+0.05 points of module `.text`), and on test units
slightly worse, so the service keeps the coreset; the chosen file is kept as a record, not served.

    python -m optserve.corpus.unit_coreset --root data/real --units 68 --rows runs/unit_coreset.jsonl \
        --out docs/bench/unit_coreset_e2b7ddda65ae.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from optserve.compiler.function_lists import split_unit
from optserve.compiler.ir import IRError
from optserve.compiler.pipeline import OZ
from optserve.compiler.unit_search import measure_functions
from optserve.compiler.workers import CompilerPool
from optserve.corpus.coreset import known_costs, label_examples, select, servable
from optserve.corpus.journal import journaled, read_jsonl, write_atomic
from optserve.corpus.label_store import seed_sets, stored_labels
from optserve.corpus.real_corpus import RealCorpusLayout
from optserve.engine.coreset import Coreset
from optserve.objectives import Objective

OBJECTIVE = Objective.TEXT_SIZE.value
PassList = tuple[str, ...]


def train_units(root: Path, count: int, max_bytes: int) -> list[dict]:
    """The first `count` train units of at most `max_bytes` of IR, in the hash order of their ids."""
    corpus = RealCorpusLayout(root).corpus("units")
    units = [u for shard in corpus.shards(("train",)) for u in read_jsonl(shard) if len(u["ir"]) <= max_bytes]
    units.sort(key=lambda u: hashlib.sha256(u["id"].encode()).hexdigest())
    return units[:count]


def candidate_lists(
    store: Path, coreset: Coreset, min_units: int = 3, from_labels: int = 30
) -> list[PassList]:
    """The pool, in a fixed order, servable lists only: the coreset's, those among the top lists of at least
    `min_units` train unit labels (or their best), and the first `from_labels` of the greedy choice on the
    unit labels."""
    records = [r for r in stored_labels(store, "units").get(OBJECTIVE, {}).values() if r["split"] == "train"]
    in_top = Counter(p for r in records for p in {tuple(r["pass_list"]), *(tuple(p) for _, p in r["top"])})
    frequent = sorted((p for p, n in in_top.items() if n >= min_units), key=lambda p: (-in_top[p], p))
    sets = seed_sets(store)
    examples = [(r["oz"], {p: c for p, c in known_costs(r, sets).items() if servable(p)}) for r in records]
    chosen = [p for p, _, _ in select(examples, from_labels)]
    pool = [*coreset.first(OBJECTIVE, len(coreset.lists.get(OBJECTIVE, ()))), *frequent, *chosen]
    return [p for p in dict.fromkeys(pool) if p != OZ and servable(p)]


async def measure_unit(unit: dict, lists: Sequence[PassList], pool: CompilerPool) -> dict | None:
    """-Oz and every list on each function module of the unit: {"costs": {function: [oz, *lists]}}."""
    try:
        parts = await asyncio.to_thread(split_unit, unit["ir"])
    except IRError:  # aliases or ifuncs: the per-function path skips these units too
        return None
    measured = await measure_functions(parts, [OZ, *lists], OBJECTIVE, pool)
    return {"id": unit["id"], "package": unit["package"], "costs": measured.costs}


def module_examples(rows: list[dict], lists: Sequence[PassList]) -> list[tuple[int, dict[PassList, int]]]:
    """(-Oz cost, {list: cost}) per function module that compiled at -Oz (select's examples)."""
    examples = []
    for row in rows:
        for costs in row["costs"].values():
            if costs[0] is not None:
                examples.append(
                    (costs[0], {p: c for p, c in zip(lists, costs[1:], strict=True) if c is not None})
                )
    return examples


def saved(examples: list[tuple[int, dict[PassList, int]]], lists: Sequence[PassList]) -> float:
    """Fraction of the modules' -Oz total saved by the best of -Oz and `lists` per module."""
    oz = sum(o for o, _ in examples)
    best = sum(min([o, *(costs[p] for p in lists if p in costs)]) for o, costs in examples)
    return (oz - best) / oz if oz else 0.0


Labelled = list[tuple[str, int, dict[PassList, int]]]  # (package, oz cost, {list: cost}) of a label


def prior_examples(store: Path) -> Labelled:
    """The coreset's own examples (train labels of functions and units, `text_size`), with their package."""
    records, examples = label_examples(store, OBJECTIVE)
    return [(r["package"], oz, costs) for r, (oz, costs) in zip(records, examples, strict=True)]


def choose(rows: list[dict], lists: Sequence[PassList], prior: Labelled, weight: float, k: int) -> list:
    """select's (list, gain, wins) over the prior's examples and the modules, a module weighing `weight`."""
    modules = module_examples(rows, lists)
    examples = [(oz, costs) for _, oz, costs in prior] + modules
    return select(examples, k, weights=[1.0] * len(prior) + [weight] * len(modules))


def held_out_check(
    rows: list[dict],
    lists: Sequence[PassList],
    old: Sequence[PassList],
    prior: Labelled,
    weight: float,
    k: int,
) -> list[str]:
    """Four folds by package: choose without a fold's packages (modules and labels), measure on its modules,
    beside the coreset's first k (which saw every train package's labels): whether the choice carries over."""
    packages = sorted({r["package"] for r in rows}, key=lambda p: hashlib.sha256(p.encode()).hexdigest())
    totals: dict[str, list[float]] = {}
    for fold in (set(packages[i::4]) for i in range(4)):
        test = module_examples([r for r in rows if r["package"] in fold], lists)
        fit = [r for r in rows if r["package"] not in fold]
        fit_prior = [e for e in prior if e[0] not in fold]
        oz = sum(o for o, _ in test)
        for name, chosen in (
            (f"coreset's first {k}", list(old[:k])),
            ("modules alone", [p for p, _, _ in select(module_examples(fit, lists), k, relative=False)]),
            ("labels alone", [p for p, _, _ in choose([], lists, fit_prior, weight, k)]),
            (f"labels + modules x{weight:g}", [p for p, _, _ in choose(fit, lists, fit_prior, weight, k)]),
        ):
            total = totals.setdefault(name, [0.0, 0.0])
            total[0] += saved(test, chosen) * oz
            total[1] += oz
    return [f"held out by package (4 folds), {name}: {100 * s / oz:.2f}%" for name, (s, oz) in totals.items()]


def build(rows: list[dict], lists: Sequence[PassList], prior: Labelled, weight: float, k: int) -> dict:
    """The coreset file: `k` lists chosen over the labels and every measured module."""
    examples = module_examples(rows, lists)
    chosen = choose(rows, lists, prior, weight, k)
    objectives = {OBJECTIVE: [{"passes": list(p), "gain": gain, "wins": wins} for p, gain, wins in chosen]}
    return {
        "version": hashlib.sha256(json.dumps(objectives, sort_keys=True).encode()).hexdigest()[:12],
        "objectives": objectives,
        "selected_from": {
            OBJECTIVE: {
                "function_modules": len(examples),
                "units": len(rows),
                "packages": len({r["package"] for r in rows}),
                "lists": len(lists),
                "labels": len(prior),
                "module_weight": weight,
            }
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--store", type=Path, default=Path("data/labels/real"))
    parser.add_argument("--coreset", type=Path, default=Path("models/coreset/coreset.json"))
    parser.add_argument("--units", type=int, default=150, help="train units, in a fixed hash order")
    parser.add_argument("--max-bytes", type=int, default=200_000)
    parser.add_argument("--k", type=int, default=30, help="lists to choose")
    parser.add_argument("--module-weight", type=float, default=100.0, help="labels one module weighs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--rows", type=Path, required=True, help="per-module costs (resumable)")
    parser.add_argument("--measure-only", action="store_true", help="measure, choose nothing")
    parser.add_argument("--out", type=Path, help="the chosen coreset (JSON)")
    args = parser.parse_args(argv)
    old = Coreset.load(args.coreset)
    lists = candidate_lists(args.store, old)
    pool_file = args.rows.with_suffix(".lists.json")
    if pool_file.exists() and [tuple(p) for p in json.loads(pool_file.read_text())] != lists:
        raise SystemExit(f"{args.rows} was measured with another pool of lists ({pool_file}): use new rows")
    write_atomic(pool_file, json.dumps([list(p) for p in lists]) + "\n")
    units = train_units(args.root, args.units, args.max_bytes)

    async def run() -> list[dict]:
        with CompilerPool(processes=args.workers, timeout_s=args.timeout) as pool:
            return await journaled(units, lambda unit: measure_unit(unit, lists, pool), args.rows)

    rows = asyncio.run(run())
    examples = module_examples(rows, lists)
    old_lists = old.first(OBJECTIVE, args.k)
    print(f"{len(rows)} train units ({len({r['package'] for r in rows})} packages), {len(examples)} modules, "
          f"{len(lists)} lists; -Oz total {sum(o for o, _ in examples):,} B")  # fmt: skip
    if args.measure_only:
        return 0
    prior = prior_examples(args.store)
    print("\n".join(held_out_check(rows, lists, old_lists, prior, args.module_weight, 10)))
    coreset = build(rows, lists, prior, args.module_weight, args.k)
    chosen = [tuple(item["passes"]) for item in coreset["objectives"][OBJECTIVE]]
    for count in (1, 3, 10, args.k):
        print(f"in sample, first {count}: old coreset {100 * saved(examples, old_lists[:count]):.2f}%, "
              f"chosen {100 * saved(examples, chosen[:count]):.2f}%")  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(coreset, indent=1) + "\n")
        print(f"wrote {args.out} (version {coreset['version']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
