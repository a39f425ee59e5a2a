"""Measure the tile Q-network's actions on its training shapes (sizes 16..2048, every contraction kind).

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_tile_actions.py --per-kind 20 --budget-s 1100 \
        --out data/looptune/tile_actions.json

The actions (policies/tile_actions.py) are the bundled cover's templates plus the first `--templates` of the
pool (policies/tiles.py, fixed-seed order), each packed and unpacked (`-u`; the same nest except for A·B^T-,
A^T·B- and A^T·B^T-like kinds, then measured once). The shapes are `suites.wide_training_suite` (never a
held-out one), taken one kind after another so that a run cut by `--budget-s` keeps the kinds balanced.
Every shape's schedules are timed in `--rounds` interleaved rounds (scheduler.measure_interleaved, the
polish's warm-up and repeats), best per schedule, so machine drift stays out of their ratios. The output is
rewritten after every shape; `--resume` skips the shapes it already holds.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402


def round_robin(cases: list) -> list:
    """One shape of every kind, then the next of every kind, ...: a cut run keeps the kinds balanced."""
    by_kind: dict[str, list] = {}
    for case in cases:
        by_kind.setdefault(case.kind, []).append(case)
    return [c for group in itertools.zip_longest(*by_kind.values()) for c in group if c is not None]


def measure_shape(case, actions: list[str], rounds: int, settings, target) -> list[float]:
    """GFLOPS of every action's schedule on one shape (0: refused or not fitting the target)."""
    from optserve.policies.scheduler import measure_interleaved
    from optserve.policies.tile_actions import apply_tile, tile_mask

    spec = case.spec(settings)
    fit = tile_mask(actions, target)
    schedules = [apply_tile(spec, a, target) for a, ok in zip(actions, fit, strict=True) if ok]
    timed, _ = measure_interleaved(spec, schedules, rounds, settings)
    values = iter(timed)
    return [round(next(values), 2) if ok else 0.0 for ok in fit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=20, help="training shapes per contraction kind")
    parser.add_argument("--templates", type=int, default=40, help="pool templates besides the cover")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved timing rounds per shape")
    parser.add_argument("--budget-s", type=float, default=1100.0, help="stop starting shapes after this")
    parser.add_argument("--out", default="data/looptune/tile_actions.json")
    parser.add_argument("--resume", action="store_true", help="keep the shapes --out already holds")
    args = parser.parse_args(argv)

    from optserve.config import LoopTuneSettings
    from optserve.kernels.jit import host_description, host_target
    from optserve.looptune_training.suites import HELD_OUT, wide_training_suite
    from optserve.policies.tiles import tile_action_space

    limits = LoopTuneSettings()
    # the polish's protocol per round: 2 warm-up calls, best of 3 runs
    settings = LoopTuneSettings(
        timing_repeats=limits.polish_timing_repeats, timing_warmup_calls=limits.polish_warmup_calls
    )
    target = host_target(settings.max_kernel_statements)
    actions = tile_action_space(args.templates)
    suite = round_robin(wide_training_suite(args.per_kind))
    held = {c.name for c in HELD_OUT}
    assert not held & {c.name for c in suite}, "a held-out shape in the training suite"
    out = Path(args.out)
    shapes: list[dict] = []
    if args.resume and out.is_file():
        earlier = json.loads(out.read_text())
        if earlier["actions"] != actions:
            raise SystemExit(f"{out} measured other actions; drop --resume")
        shapes = earlier["shapes"]
    done = {r["shape"] for r in shapes}
    start = time.perf_counter()
    for number, case in enumerate(suite, 1):
        if case.name in done:
            continue
        if time.perf_counter() - start > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: {len(shapes)} of {len(suite)} shapes", flush=True)
            break
        gflops = measure_shape(case, actions, args.rounds, settings, target)
        shapes.append({"shape": case.name, "kind": case.kind, "gflops": gflops})
        best = max(range(len(actions)), key=gflops.__getitem__)
        print(
            f"[{number}/{len(suite)}] {case.name}: best {actions[best]} {gflops[best]:.1f} GFLOPS,"
            f" {time.perf_counter() - start:.0f} s",
            flush=True,
        )
        meta = {
            "measured_on": host_description(),
            "machine": f"{os.cpu_count()} cores, {platform.machine()}",
            "load_average": os.getloadavg()[0],
            "date": datetime.date.today().isoformat(),
            "command": "python benchmarks/looptune_tile_actions.py " + " ".join(argv or sys.argv[1:]),
            "rounds": args.rounds,
            "seconds": round(time.perf_counter() - start, 1),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"meta": meta, "actions": actions, "shapes": shapes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
