"""Register tiles and cache blocks on a 2048^3 matmul kind at 1 thread: the tile the default decision
replays there (its cache blocks at most the 512^3 sub-problem's, policies/proxy.py) against wider register
tiles and smaller reduction blocks, timed in interleaved rounds with numpy's matmul (issue 36: 2048^3 at
0.68x OpenBLAS on the lent Xeon). Each timing of a kernel is `--warmup` calls and `--repeats` timed ones
(0.15-0.2 s a call at 2048^3 on one core): with the service's 20 + 10 a template costs ~5 s a round, so the
defaults here are smaller, to fit a lent call. An AMD EPYC (Zen 4) host does not tell these tiles apart
(six of TEMPLATES within 3% at 2048^3 there, 104-107 GFLOPS: its 512-bit FMAs run as two 256-bit halves),
so only an Intel AVX-512 host (the lent Xeon) answers the question.

A template named with the suffix `+a` is built with its broadcast operand A packed in panels whatever its
rows (kernels/tiling.py PANEL_ROWS lowered to them for that template): whether the 6-row tile gains by
reading A from panels as the 8- and 12-row tiles do.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_tile2048_ab.py --kinds matmul --size 2048 --rounds 2
"""

from __future__ import annotations

import argparse
import sys

TEMPLATES = [
    "12x1rv-k512-v512-r512",
    "8x2rv-k512-v256-r128",
    "12x1rv-k256-v512-r512",
    "8x2rv-k256-v256-r128",
    "12x2rv-k256-v256-r192",
    "14x2rv-k256-v256-r224",
    "6x4rv-k256-v512-r96",
    "24x1rv-k256-v512-r192",
    "12x2rv-k512-v256-r192",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["matmul"])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--templates", nargs="+", default=TEMPLATES)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="kernel threads (numpy: OPENBLAS_NUM_THREADS)")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.config import LoopTuneSettings
    from optserve.kernels.jit import host_target
    from optserve.looptune_training.suites import case
    from optserve.policies.scheduler import measure_interleaved

    settings = LoopTuneSettings(timing_repeats=args.repeats, timing_warmup_calls=args.warmup)
    width = host_target(settings.max_kernel_statements).vector_widths[0]
    size = args.size
    for kind in args.kinds:
        spec = case(kind, m=size, k=size, n=size).spec(settings)
        schedules = [built(spec, name, width) for name in args.templates]
        gflops, numpy = measure_interleaved(
            spec, schedules, args.rounds, settings, numpy_sizes=(size, size, size), threads=args.threads
        )
        for name, value, schedule in zip(args.templates, gflops, schedules, strict=True):
            print(
                f"{kind} {size}^3 {name} ({args.threads} thr): {value:.1f} GFLOPS"
                f" ({value / numpy:.2f}x numpy)"
                f" packed {','.join(schedule.pack) or '-'}",
                flush=True,
            )
        print(f"{kind} {size}^3 numpy-matmul {numpy:.1f} GFLOPS", flush=True)
    return 0


def built(spec, name: str, width: int):
    """The tiled schedule of template `name`; with the suffix `+a`, A's panels from the tile's own rows."""
    from optserve.kernels import tiling

    template = tiling.TileTemplate.from_name(name.removesuffix("+a"))
    if not name.endswith("+a"):
        return tiling.tiled_schedule(spec, template, width)
    rows, tiling.PANEL_ROWS = tiling.PANEL_ROWS, min(tiling.PANEL_ROWS, template.rows)
    try:
        return tiling.tiled_schedule(spec, template, width)
    finally:
        tiling.PANEL_ROWS = rows


if __name__ == "__main__":
    sys.exit(main())
