"""Order the coreset's `text_size` lists for the function modules of whole units (train units only).

The coreset (models/coreset/coreset.json) was ordered on isolated functions of the function corpus; a unit's
function modules (compiler/function_lists.py: a function with the static helpers only it calls) are another
population. This measures -Oz and every coreset list on every function module of train units, then orders the
lists greedily: each next list is the one that saves the most `.text` over the modules, given -Oz and the
lists before it (per module the best is kept, as the per-function search keeps it).

    python benchmarks/unit_list_order.py --units 80 --rows runs/unit_order.jsonl --out runs/unit_order.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from optserve.compiler.function_lists import split_unit
from optserve.compiler.ir import IRError
from optserve.compiler.pipeline import OZ
from optserve.compiler.unit_search import measure_functions
from optserve.compiler.workers import CompilerPool
from optserve.corpus.journal import read_jsonl
from optserve.corpus.real_corpus import RealCorpusLayout
from optserve.engine.coreset import Coreset

OBJECTIVE = "text_size"


def train_units(root: Path, count: int, max_bytes: int) -> list[dict]:
    corpus = RealCorpusLayout(root).corpus("units")
    units = [u for shard in corpus.shards(("train",)) for u in read_jsonl(shard) if len(u["ir"]) <= max_bytes]
    units.sort(key=lambda u: hashlib.sha256(u["id"].encode()).hexdigest())
    return units[:count]


def greedy_order(modules: list[list[int | None]], count: int) -> list[tuple[int, int]]:
    """Indexes of lists (1-based: 0 is -Oz, always measured) in greedy order, with the bytes each adds."""
    best = [m[0] if m[0] is not None else min(c for c in m if c is not None) for m in modules]
    order: list[tuple[int, int]] = []
    remaining = set(range(1, len(modules[0])))
    for _ in range(min(count, len(remaining))):
        gains = {
            index: sum(
                b - m[index]
                for m, b in zip(modules, best, strict=True)
                if m[index] is not None and m[index] < b
            )
            for index in remaining
        }
        index = max(sorted(remaining), key=lambda i: gains[i])  # ties: the coreset's earlier list
        order.append((index, gains[index]))
        remaining.discard(index)
        best = [min(b, m[index]) if m[index] is not None else b for m, b in zip(modules, best, strict=True)]
    return order


async def _measure(args, lists) -> list[dict]:
    done = {}
    if args.rows.exists():
        done = {json.loads(line)["id"]: json.loads(line) for line in args.rows.read_text().splitlines()}
    rows = []
    with CompilerPool(processes=args.workers, timeout_s=args.timeout) as pool:
        for unit in tqdm(train_units(args.root, args.units, args.max_bytes), desc="units", unit="unit"):
            if unit["id"] in done:
                rows.append(done[unit["id"]])
                continue
            try:
                parts = await asyncio.to_thread(split_unit, unit["ir"])
            except IRError:
                continue
            measured = await measure_functions(parts, [OZ, *lists], OBJECTIVE, pool)
            row = {"id": unit["id"], "package": unit["package"], "costs": measured.costs}
            rows.append(row)
            with args.rows.open("a") as out:
                out.write(json.dumps(row) + "\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--units", type=int, default=80, help="train units, in a fixed hash order")
    parser.add_argument("--max-bytes", type=int, default=200_000)
    parser.add_argument("--lists", type=int, default=100, help="the coreset's first lists to order")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--rows", type=Path, required=True, help="per-module costs (resumable)")
    parser.add_argument("--out", type=Path, required=True, help="the ordered lists (JSON)")
    args = parser.parse_args(argv)
    coreset = Coreset.load(Path("models/coreset/coreset.json"))
    lists = list(coreset.first(OBJECTIVE, args.lists))
    rows = asyncio.run(_measure(args, lists))
    modules = [costs for row in rows for costs in row["costs"].values() if any(c is not None for c in costs)]
    oz = sum(m[0] for m in modules if m[0] is not None)
    order = greedy_order(modules, 30)
    print(f"{len(rows)} train units ({len({r['package'] for r in rows})} packages), {len(modules)} modules, "
          f"-Oz total {oz:,} B")  # fmt: skip
    saved = 0
    for rank, (index, gain) in enumerate(order, 1):
        saved += gain
        print(f"{rank:3d}. coreset #{index:3d} +{gain:6,} B  (cumulative {100 * saved / oz:.2f}%)  "
              f"{' '.join(lists[index - 1])}")  # fmt: skip
    first10 = greedy_gain(modules, list(range(1, 11)))
    print(f"coreset's own first 10: {100 * first10 / oz:.2f}%; ordered first 10: "
          f"{100 * sum(g for _, g in order[:10]) / oz:.2f}%")  # fmt: skip
    args.out.write_text(
        json.dumps(
            {
                "objective": OBJECTIVE,
                "coreset": coreset.version,
                "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "units": len(rows),
                "modules": len(modules),
                "lists": [{"passes": list(lists[index - 1]), "coreset_rank": index} for index, _ in order],
            },
            indent=1,
        )
    )
    return 0


def greedy_gain(modules: list[list[int | None]], indexes: list[int]) -> int:
    """Bytes saved over -Oz by the best of -Oz and the lists at `indexes`, per module."""
    total = 0
    for m in modules:
        base = m[0] if m[0] is not None else min(c for c in m if c is not None)
        total += base - min([base, *(m[i] for i in indexes if m[i] is not None)])
    return total


if __name__ == "__main__":
    raise SystemExit(main())
