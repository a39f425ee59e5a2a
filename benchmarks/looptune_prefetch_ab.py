"""Software prefetch in the register tile's innermost loop (kernels/codegen.py `Target.prefetch_distance`):
the same schedules compiled with the vector operand's lines prefetched 0 (none) or d steps of k ahead,
timed in interleaved rounds with numpy's matmul, on the large matmul kinds (issue 36: at one thread the
6x4 tile reads 4 new lines of its packed B panel per step of k, from L2, and ran 0.92-0.96x OpenBLAS on
the transposed kinds at 2048^3 on the lent Xeon).

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_prefetch_ab.py --kinds matmul matmul_at --sizes 2048
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

TEMPLATE = "6x4rv-k512-v512-r96"  # the 1-thread wide tile (policies/tiles.py WIDE_TILES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["matmul", "matmul_at", "matmul_bt", "matmul_tt"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[2048, 1000])
    parser.add_argument("--distances", nargs="+", type=int, default=[0, 4, 8, 16])
    parser.add_argument("--templates", nargs="+", default=[TEMPLATE])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="kernel threads (numpy: OPENBLAS_NUM_THREADS)")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.kernels.jit import host_target
    from optserve.kernels.measure import measure, numpy_gflops
    from optserve.kernels.parallel import compile_parallel
    from optserve.kernels.tiling import TileTemplate, tiled_schedule
    from optserve.looptune_training.suites import case

    base = host_target()
    width = base.vector_widths[0]
    ratios: dict[tuple[str, int], list[float]] = {}
    for size in args.sizes:
        for kind in args.kinds:
            spec = case(kind, m=size, k=size, n=size).spec()
            variants = {}
            for name in args.templates:
                schedule = tiled_schedule(spec, TileTemplate.from_name(name), width)
                for distance in args.distances:
                    target = dataclasses.replace(base, prefetch_distance=distance)
                    variants[(name, distance)] = compile_parallel(spec, schedule, args.threads, target=target)
            best = dict.fromkeys(variants, 0.0)
            best_numpy = 0.0
            try:
                for _ in range(args.rounds):
                    for key, kernel in variants.items():
                        timing = measure(kernel, runs=args.repeats, warmup_calls=args.warmup)
                        best[key] = max(best[key], timing.gflops)
                    best_numpy = max(best_numpy, numpy_gflops(size, size, size))
            finally:
                for kernel in variants.values():
                    kernel.close()
            for (name, distance), value in best.items():
                ratios.setdefault((name, distance), []).append(value / best_numpy)
                print(
                    f"{kind} {size}^3 {name} prefetch {distance} ({args.threads} thr): {value:.1f} GFLOPS"
                    f" ({value / best_numpy:.3f}x numpy {best_numpy:.1f})",
                    flush=True,
                )
    for (name, distance), values in ratios.items():
        geomean = statistics.geometric_mean(values)
        print(f"geomean {name} prefetch {distance}: {geomean:.3f}x numpy", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
