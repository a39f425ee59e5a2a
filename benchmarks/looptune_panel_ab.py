"""Sub-problems timed with or without the whole's panels: the default decision on large matmul kinds with
kernels/tiling.py PANEL_FLOATS as it is (512 x 512 operands packed in panels, as the whole's are) and one
float higher (the 512^3 sub-problem timed without them), each decision's kernel on the whole timed in
interleaved rounds (the sizes sweep at 1 thread).

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_panel_ab.py --sizes 1000 2048 --rounds 3
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["matmul", "matmul_at", "matmul_bt", "matmul_tt"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 2048])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.config import LoopTuneSettings
    from optserve.kernels import tiling
    from optserve.kernels.schedule import Schedule
    from optserve.looptune_training.suites import case
    from optserve.policies.scheduler import measure_interleaved, schedule_nest

    settings = LoopTuneSettings()
    current = tiling.PANEL_FLOATS
    for kind in args.kinds:
        for size in args.sizes:
            spec = case(kind, m=size, k=size, n=size).spec(settings)
            chosen = {}
            for label, floats in (("timed on panels", current), ("timed without", current + 1)):
                tiling.PANEL_FLOATS = floats
                try:
                    result = schedule_nest(spec, "policy_tiles", time_limit_s=10.0, threads=1)
                finally:
                    tiling.PANEL_FLOATS = current
                chosen[label] = (result.actions[0] if result.actions else "(base)", result.schedule)
            schedules = [Schedule.from_text(text) for _, text in chosen.values()]
            gflops, numpy = measure_interleaved(
                spec, schedules, args.rounds, settings, numpy_sizes=(size, size, size)
            )
            pairs = zip(chosen.items(), gflops, strict=True)
            cells = ", ".join(f"{label}: {action} {g:.1f}" for (label, (action, _)), g in pairs)
            print(f"{kind} {size}^3: {cells}; numpy-matmul {numpy:.1f} GFLOPS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
