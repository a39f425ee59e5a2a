"""A coreset of pass lists: K lists chosen from the training labels so that, tried in order, they save most.

Every local-search label records the costs of its seed lists (dense) and of its top-k lists (sparse). From
those costs, greedy selection (the classic (1 - 1/e) approximation for this coverage objective) repeatedly
takes the list whose addition saves the most, summed over training examples as a fraction of each example's
-Oz cost (so a large unit does not outweigh a thousand functions); a cost that was never measured counts as
no saving. The order is the selection order, so the first k lists are the best k-list prefix found, and the
service's `coreset` strategy serves the first `samples` of them.

Output (`models/coreset/coreset.json`, read by the service):
    {"version": ..., "objectives": {objective: [{"passes": [...], "gain": fraction, "wins": n}, ...]},
     "selected_from": {objective: {"examples": n, "packages": n, "lists": n}}}
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from optserve.compiler.passes import PassListError, validate_pass_list
from optserve.compiler.pipeline import OZ
from optserve.corpus.label import OBJECTIVES
from optserve.corpus.label_store import seed_sets, stored_labels

MAX_LISTS = 100


def select(
    examples: Iterable[tuple[int, dict[tuple[str, ...], int]]],
    k: int = MAX_LISTS,
    relative: bool = True,
    weights: Sequence[float] | None = None,
) -> list[tuple[tuple[str, ...], float, int]]:
    """Greedy coverage: from (oz cost, {list: cost}) per example, up to `k` (list, gain, wins), best first.
    A gain is a fraction of each example's -Oz cost, or (`relative=False`) in cost units: bytes saved in
    total, what a whole build's `.text` counts; `weights` (one per example) scale each example's gains."""
    examples = list(examples)
    weights = [1.0] * len(examples) if weights is None else weights
    kept = [(oz, costs, w) for (oz, costs), w in zip(examples, weights, strict=True) if oz > 0]
    rows = [(oz, costs) for oz, costs, _ in kept]
    weight = [w for _, _, w in kept]
    current = [oz for oz, _ in rows]
    chosen: list[tuple[tuple[str, ...], float, int]] = []
    while len(chosen) < k:
        gains: dict[tuple[str, ...], float] = defaultdict(float)
        wins: dict[tuple[str, ...], int] = defaultdict(int)
        for index, (oz, costs) in enumerate(rows):
            for pass_list, cost in costs.items():
                if cost < current[index]:
                    gains[pass_list] += (current[index] - cost) * weight[index] / (oz if relative else 1)
                    wins[pass_list] += 1
        if not gains:
            break
        best = max(gains, key=lambda p: (gains[p], -len(p), p))
        chosen.append((best, gains[best], wins[best]))
        for index, (_, costs) in enumerate(rows):
            if best in costs:
                current[index] = min(current[index], costs[best])
    return chosen


def known_costs(record: dict[str, Any], seed_sets: dict[str, Sequence[Sequence[str]]]) -> dict:
    """Every measured (list -> cost) of one label: its seed lists and its top lists."""
    costs: dict[tuple[str, ...], int] = {}
    seeds = seed_sets.get(record.get("seeds", ""), ())
    for pass_list, cost in zip(seeds, record.get("seed_costs", ()), strict=False):
        if cost is not None:
            costs[tuple(pass_list)] = cost
    for fingerprint, measured in record.get("measured", {}).items():  # stage `measure`: coreset costs
        for pass_list, cost in zip(seed_sets.get(fingerprint, ()), measured, strict=False):
            if cost is not None:
                costs[tuple(pass_list)] = min(cost, costs.get(tuple(pass_list), cost))
    for cost, pass_list in record.get("top", ()):
        costs[tuple(pass_list)] = min(cost, costs.get(tuple(pass_list), cost))
    costs[OZ] = record["oz"]
    return costs


def servable(pass_list: Sequence[str]) -> bool:
    """Whether the vocabulary still offers every pass of the list (labels predate dropped passes)."""
    try:
        validate_pass_list(pass_list)
    except PassListError:
        return False
    return True


def label_examples(
    store: Path, objective: str, split: str = "train"
) -> tuple[list[dict], list[tuple[int, dict[tuple[str, ...], int]]]]:
    """The store's `split` labels of one objective (functions and units together) and select's examples
    from them: (oz cost, {servable list: cost})."""
    sets = seed_sets(store)
    records = [
        r
        for granularity in ("functions", "units")
        for r in stored_labels(store, granularity).get(objective, {}).values()
        if r["split"] == split
    ]
    examples = [(r["oz"], {p: c for p, c in known_costs(r, sets).items() if servable(p)}) for r in records]
    return records, examples


def build_coreset(store: Path, k: int = MAX_LISTS, split: str = "train") -> dict[str, Any]:
    """The coreset per objective from the store's `split` labels (functions and units together)."""
    result: dict[str, Any] = {"objectives": {}, "selected_from": {}}
    for objective in OBJECTIVES:
        records, examples = label_examples(store, objective, split)
        if not records:
            continue
        chosen = select(examples, k)
        result["objectives"][objective] = [
            {"passes": list(p), "gain": round(gain, 6), "wins": wins} for p, gain, wins in chosen
        ]
        result["selected_from"][objective] = {
            "examples": len(records),
            "packages": len({r["package"] for r in records}),
            "lists": len({p for _, costs in examples for p in costs}),
        }
    result["version"] = hashlib.sha256(json.dumps(result["objectives"], sort_keys=True).encode()).hexdigest()[
        :12
    ]
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Choose the coreset of pass lists from the committed labels."
    )
    parser.add_argument("--store", type=Path, default=Path("data/labels/real"))
    parser.add_argument("--k", type=int, default=MAX_LISTS)
    parser.add_argument("--out", type=Path, default=Path("models/coreset/coreset.json"))
    args = parser.parse_args(argv)
    coreset = build_coreset(args.store, args.k)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(coreset, indent=1) + "\n")
    for objective, lists in coreset["objectives"].items():
        total = sum(item["gain"] for item in lists)
        print(
            f"{objective}: {len(lists)} lists, from {coreset['selected_from'][objective]}; gain {total:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
