"""Collect measured GFLOPS of many schedules of the LoopTune training shapes (cost-model and demo data).

For each training shape (fixed-seed order), a worker pinned to its own core runs beam-4 BFS for
`--beam-s` seconds and random 10-step walks for `--random-s` seconds, ranked by measured GFLOPS, and
records every distinct compute nest it measured (GFLOPS, best of 10 runs) plus the best action sequence
of each search. Work stops at `--budget-s` wall seconds; everything finished by then is written.

    OPENBLAS_NUM_THREADS=1 python -m optserve.looptune_training.collect --jobs 15 --first-core 1 \
        --budget-s 330 --out data/looptune/measured.json.gz

Output (gzip JSON): {"meta": {...}, "shapes": [{"shape", "beam": {actions, gflops}, "random": {...},
"nests": [[compute_nest, gflops], ...]}]} where compute_nest is `index:size:tail;...` outermost first.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from pathlib import Path  # noqa: E402

ORDER_SEED = 7


def collect_shape(item: tuple[str, float, float, float]) -> dict | None:
    name, beam_s, random_s, stop_at = item
    if time.time() + beam_s + random_s > stop_at:
        return None
    from optserve.kernels.schedule import Schedule
    from optserve.looptune_training.dataset import Benchmark
    from optserve.looptune_training.templates import nest_text
    from optserve.policies.env import AgentState, Evaluator
    from optserve.policies.scheduler import measure_schedule
    from optserve.policies.search import beam_bfs, random_search

    m, k, n = (int(x) for x in name.removeprefix("mm").split("_"))
    spec = Benchmark(name, m, k, n).spec()
    nests: list[list] = []

    def recorded(s, schedule) -> float:
        gflops = measure_schedule(s, schedule)
        nests.append([nest_text(schedule), round(gflops, 3)])
        return gflops

    evaluator = Evaluator(spec, recorded)
    root = AgentState(Schedule.base(spec))
    beam = beam_bfs(evaluator, root, 4, time.perf_counter() + beam_s)
    rand = random_search(evaluator, root, time.perf_counter() + random_s, seed=zlib.crc32(name.encode()))
    return {
        "shape": name,
        "beam": {"actions": list(beam.actions), "gflops": beam.gflops},
        "random": {"actions": list(rand.actions), "gflops": rand.gflops},
        "nests": nests,
        "core": sorted(os.sched_getaffinity(0))[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--first-core", type=int, default=0)
    parser.add_argument("--beam-s", type=float, default=5.0)
    parser.add_argument("--random-s", type=float, default=2.0)
    parser.add_argument("--budget-s", type=float, default=300.0, help="wall seconds for the whole collection")
    parser.add_argument("--out", default="data/looptune/measured.json.gz")
    args = parser.parse_args()

    from optserve.looptune_training.dataset import train_test_split
    from optserve.looptune_training.evaluate import pinned_pool, run_meta

    start = time.time()
    train, _ = train_test_split()
    order = [b.name for b in train]
    random.Random(ORDER_SEED).shuffle(order)
    stop_at = start + args.budget_s
    items = [(name, args.beam_s, args.random_s, stop_at) for name in order]
    shapes = []
    with pinned_pool(args.jobs, args.first_core) as pool:
        for result in pool.imap_unordered(collect_shape, items, chunksize=1):
            if result is None:
                continue
            shapes.append(result)
            if len(shapes) % 25 == 0:
                measured = sum(len(s["nests"]) for s in shapes)
                print(f"[{time.time() - start:.0f}s] {len(shapes)} shapes, {measured} nests", flush=True)
    meta = {**run_meta(args.jobs, start), "command": "python " + " ".join(sys.argv)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as f:
        json.dump({"meta": meta, "shapes": shapes}, f)
    measured = sum(len(s["nests"]) for s in shapes)
    print(f"{len(shapes)} shapes, {measured} measured nests in {meta['seconds']:.0f}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
