"""Time every tile template of the pool on every training-suite shape, and bundle the learned cover.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_tiles.py --out models/looptune/tiles.json

For each training shape (`looptune_training.suites`, never a held-out one) every pool template
(policies/tiles.py) is compiled and timed with the polish's protocol; the cover is the `--cover` templates
that together come closest to each shape's best. Writes the cover with what it was measured on and the raw
matrix (`--data-out`), and prints per shape the best template and how close the cover comes. On a many-core
machine, `--shard k/n` processes (one per core) each measure a part of the shapes, and `--merge` learns
the cover from their data files (benchmarks/looptune_suite_lent.sh).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np


def measure(suite: list, pool: list, settings) -> np.ndarray:
    """GFLOPS of every pool template (rows) on every shape of `suite` (columns), the polish's protocol."""
    from optserve.kernels.jit import host_target
    from optserve.kernels.tiling import tiled_schedule
    from optserve.policies.env import Evaluator
    from optserve.policies.scheduler import measure_schedule
    from optserve.policies.tiles import candidates

    target = host_target(settings.max_kernel_statements)
    gflops = np.zeros((len(pool), len(suite)))
    start = time.perf_counter()
    for column, case in enumerate(suite):
        spec = case.spec(settings)
        evaluator = Evaluator(spec, lambda s, sch: measure_schedule(s, sch, settings, quick=True))
        by_name = dict(candidates(evaluator, pool, target))
        for row, template in enumerate(pool):
            schedule = by_name.get(template.name())
            if schedule is None:  # same nest as an earlier template of this shape, or does not fit
                schedule = tiled_schedule(spec, template, target.vector_widths[0])
            gflops[row, column] = evaluator.gflops(schedule)
        best = int(np.argmax(gflops[:, column]))
        print(
            f"[{column + 1}/{len(suite)}] {case.name}: best {pool[best].name()} {gflops[best, column]:.1f}"
            f" GFLOPS, {evaluator.evaluations} nests, {time.perf_counter() - start:.0f} s",
            flush=True,
        )
    return gflops


def merged(paths: list[str], pool: list, suite: list) -> np.ndarray:
    """The full matrix from the shards' data files (columns by shape name)."""
    gflops = np.zeros((len(pool), len(suite)))
    names = [c.name for c in suite]
    for path in paths:
        part = json.loads(Path(path).read_text())
        if part["templates"] != [t.name() for t in pool]:
            raise SystemExit(f"{path}: measured on another template pool")
        for column, name in enumerate(part["shapes"]):
            gflops[:, names.index(name)] = np.array(part["gflops"])[:, column]
    return gflops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="models/looptune/tiles.json")
    parser.add_argument("--data-out", default="runs/looptune_tiles.json")
    parser.add_argument("--per-kind", type=int, default=5, help="training shapes per contraction kind")
    parser.add_argument("--pool", type=int, default=150, help="templates sampled from the grid")
    parser.add_argument("--cover", type=int, default=8, help="templates kept")
    parser.add_argument("--shard", help="k/n: measure only every n-th shape from the k-th, write --data-out")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="learn the cover from the shards' data")
    args = parser.parse_args(argv)

    from optserve.config import LoopTuneSettings
    from optserve.kernels.jit import host_description
    from optserve.looptune_training.suites import training_suite
    from optserve.looptune_training.templates import choose_cover
    from optserve.policies.tiles import POOL_SEED, template_pool

    settings = LoopTuneSettings()
    pool = template_pool(args.pool)
    suite = training_suite(args.per_kind)
    start = time.perf_counter()
    if args.shard:
        k, n = (int(part) for part in args.shard.split("/"))
        shard = suite[k::n]
        gflops = measure(shard, pool, settings)
        data = {"templates": [t.name() for t in pool], "shapes": [c.name for c in shard]}
        Path(args.data_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.data_out).write_text(json.dumps({**data, "gflops": gflops.round(2).tolist()}))
        return 0
    gflops = merged(args.merge, pool, suite) if args.merge else measure(suite, pool, settings)
    chosen = choose_cover(gflops, args.cover)
    fraction = gflops[chosen].max(axis=0) / gflops.max(axis=0)
    first = gflops[chosen[0]] / gflops.max(axis=0)
    for case, value in zip(suite, fraction, strict=True):
        print(f"  {case.name}: cover reaches {value:.2f} of the pool's best")
    meta = {
        "cover": [pool[i].name() for i in chosen],
        "pool_size": args.pool,
        "pool_seed": POOL_SEED,
        "training_suite": [c.name for c in suite],
        "cover_fraction_of_best_geomean": float(np.exp(np.log(fraction).mean())),
        "first_template_fraction_of_best_geomean": float(np.exp(np.log(np.maximum(first, 1e-9)).mean())),
        "measured_on": host_description(),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/looptune_tiles.py " + " ".join(argv or sys.argv[1:]),
        "seconds": None if args.merge else round(time.perf_counter() - start, 1),
        "shards": len(args.merge) if args.merge else 1,  # processes that measured, one shape set each
    }
    Path(args.out).write_text(json.dumps(meta, indent=1) + "\n")
    Path(args.data_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.data_out).write_text(
        json.dumps(
            {
                "templates": [t.name() for t in pool],
                "shapes": meta["training_suite"],
                "gflops": gflops.round(2).tolist(),
                "meta": meta,
            }
        )
    )
    print(json.dumps({k: v for k, v in meta.items() if k != "training_suite"}, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
