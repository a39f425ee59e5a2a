"""Measure schedule templates on the LoopTune training shapes (the policy's training data).

Stage 1: every candidate template (`looptune_training.templates`) on `--pool-shapes` training shapes;
`greedy_cover` keeps the `--templates` that together come closest to each shape's best. Stage 2: those
templates on every training shape (fixed-seed order) until `--budget-s` wall seconds are used. Workers are
pinned one per core; GFLOPS are best of 10 timed runs after 20 warm-up calls (best of `--rounds`
interleaved rounds), once per compute nest within a shape.

    OPENBLAS_NUM_THREADS=1 python -m optserve.looptune_training.measure_templates --jobs 15 --first-core 1 \
        --old-data data/looptune/measured.json.gz --budget-s 480 --out data/looptune/templates.json.gz

Output (gzip JSON): {"meta", "pool": [actions...], "stage1": {"shapes", "gflops": [[per pool entry]]},
"templates": [actions...], "shapes": [{"shape", "gflops": [per template, null = unavailable], "nests":
[[compute_nest, gflops], ...]}]}; "nests" has the format of collect.py's, so the cost model
trains on both files.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ORDER_SEED = 11


def measure_templates(item: tuple[str, list[list[str]], float, int]) -> dict | None:
    """GFLOPS of each template's final schedule on one shape (None where the template is unavailable), best of
    `rounds` interleaved rounds."""
    name, templates, stop_at, rounds = item
    if time.time() > stop_at:
        return None
    from optserve.looptune_training.templates import nest_text, play
    from optserve.looptune_training.train import benchmark
    from optserve.policies.scheduler import measure_interleaved

    spec = benchmark(name).spec()
    finals = [play(spec, actions) for actions in templates]
    schedules = [states[-1].schedule for states in finals if states is not None]
    timed = iter(measure_interleaved(spec, schedules, rounds)[0])
    gflops = [None if states is None else round(next(timed), 3) for states in finals]
    nests = {nest_text(s): g for s, g in zip(schedules, (g for g in gflops if g is not None), strict=True)}
    return {"shape": name, "gflops": gflops, "nests": sorted(nests.items())}


def run_stage(pool, items, label: str) -> list[dict]:
    start, results = time.time(), []
    for result in pool.imap_unordered(measure_templates, items, chunksize=1):
        if result is None:
            continue
        results.append(result)
        if len(results) % 50 == 0 or len(results) == len(items):
            print(f"[{label} {time.time() - start:.0f}s] {len(results)}/{len(items)} shapes", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--first-core", type=int, default=0)
    parser.add_argument(
        "--pool-shapes", type=int, default=45, help="stage 1: shapes that rank the candidates"
    )
    parser.add_argument("--templates", type=int, default=64, help="stage 2: templates kept")
    parser.add_argument("--old-data", default=None, help="collect.py output: adds its best structures")
    parser.add_argument(
        "--templates-from", default=None, help="an earlier output: skip stage 1, remeasure its templates"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="interleaved timing rounds per shape (best kept)"
    )
    parser.add_argument("--budget-s", type=float, default=480.0, help="wall seconds for both stages")
    parser.add_argument("--out", default="data/looptune/templates.json.gz")
    args = parser.parse_args()

    import numpy as np

    from optserve.looptune_training.dataset import train_test_split
    from optserve.looptune_training.evaluate import pinned_pool, run_meta
    from optserve.looptune_training.templates import (
        REFERENCE_SIZE,
        candidate_pool,
        greedy_cover,
        reachable_structures,
    )
    from optserve.looptune_training.train import benchmark

    start = time.time()
    stop_at = start + args.budget_s
    reference = benchmark(f"mm{REFERENCE_SIZE}_{REFERENCE_SIZE}_{REFERENCE_SIZE}").spec()
    old = None
    if args.old_data:
        with gzip.open(args.old_data, "rt") as f:
            old = json.load(f)["shapes"]
    earlier = None
    if args.templates_from:
        with gzip.open(args.templates_from, "rt") as f:
            earlier = json.load(f)
        pool_actions = earlier["pool"]
    else:
        pool_actions = [list(a) for a in candidate_pool(reachable_structures(reference), "n", old)]
    train, _ = train_test_split()
    order = [b.name for b in train]
    random.Random(ORDER_SEED).shuffle(order)
    print(f"{len(pool_actions)} candidate templates ({time.time() - start:.0f}s)", flush=True)

    with pinned_pool(args.jobs, args.first_core) as pool:
        if earlier:
            stage1, templates = [], earlier["templates"]
        else:
            stage1 = run_stage(
                pool, [(s, pool_actions, stop_at, args.rounds) for s in order[: args.pool_shapes]], "stage 1"
            )
            matrix = np.array([[math.log(g) if g else -math.inf for g in r["gflops"]] for r in stage1]).T
            chosen = greedy_cover(matrix, args.templates)
            templates = [pool_actions[i] for i in chosen]
            print(
                f"kept {len(templates)} templates; mean best log GFLOPS {np.max(matrix, axis=0).mean():.3f} "
                f"(pool), {np.max(matrix[chosen], axis=0).mean():.3f} (kept)"
            )
        shapes = run_stage(pool, [(s, templates, stop_at, args.rounds) for s in order], "stage 2")
    meta = {**run_meta(args.jobs, start), "command": "python " + " ".join(sys.argv)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as f:
        json.dump(
            {
                "meta": meta,
                "pool": pool_actions,
                "stage1": {"shapes": [r["shape"] for r in stage1], "gflops": [r["gflops"] for r in stage1]},
                "templates": templates,
                "shapes": shapes,
            },
            f,
        )
    print(f"{len(shapes)} shapes x {len(templates)} templates in {meta['seconds']:.0f}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
