"""Does the sub-problem a large contraction is decided on rank its tiles as the whole does? For each kind at
`--size`^3 (1 thread), every template of `--templates` (default: the bundled cover and the wide register
tiles of benchmarks/looptune_tile2048_ab.py) is timed on the 512^3 sub-problem (policies/proxy.py
`timed_spec`, the decision's protocol: warm-up 2, best of 3, in `--sub-rounds` interleaved rounds) and
replayed on the whole (`replay`, interleaved with numpy's matmul), so the two rankings can be compared.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_subproblem_probe.py --kinds matmul --size 2048
"""

from __future__ import annotations

import argparse
import math
import sys

WIDE = ["6x4rv-k256-v512-r96", "8x2rv-k256-v256-r128", "12x2rv-k256-v256-r192"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["matmul", "matmul_at", "matmul_bt", "matmul_tt"])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--templates", nargs="+", default=None)
    parser.add_argument("--sub-rounds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--deep", action="store_true", help="also a sub-problem with the whole reduction")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.config import LoopTuneSettings
    from optserve.kernels.jit import host_target
    from optserve.kernels.tiling import TileTemplate, tiled_schedule
    from optserve.looptune_training.suites import case
    from optserve.policies.proxy import replay, timed_spec
    from optserve.policies.scheduler import measure_interleaved
    from optserve.policies.tiles import load_cover

    names = args.templates or [t.name() for t in load_cover()] + WIDE
    quick = LoopTuneSettings(timing_repeats=3, timing_warmup_calls=2)
    whole_settings = LoopTuneSettings(timing_repeats=args.repeats, timing_warmup_calls=args.warmup)
    target = host_target(quick.max_kernel_statements)
    width = target.vector_widths[0]
    size = args.size
    for kind in args.kinds:
        spec = case(kind, m=size, k=size, n=size).spec(quick)
        timed = timed_spec(spec, quick.timed_flops)
        subs = [tiled_schedule(timed, TileTemplate.from_name(n), width) for n in names]
        sub_gflops, _ = measure_interleaved(timed, subs, args.sub_rounds, quick)
        wholes = [replay(spec, ("tile:" + n,), target, timed) for n in names]
        whole_gflops, numpy = measure_interleaved(
            spec, wholes, args.rounds, whole_settings, numpy_sizes=(size, size, size)
        )
        deep_sub, deep_whole = [0.0] * len(names), [0.0] * len(names)
        if args.deep:
            deep = deep_spec(spec, quick.timed_flops)
            subs = [tiled_schedule(deep, TileTemplate.from_name(n), width) for n in names]
            deep_sub, _ = measure_interleaved(deep, subs, args.sub_rounds, quick)
            wholes = [replay(spec, ("tile:" + n,), target, deep) for n in names]
            deep_whole, _ = measure_interleaved(spec, wholes, args.rounds, whole_settings)
            print(f"{kind} deep sub-problem {deep.size_of}", flush=True)
        for i, name in enumerate(names):
            sub, whole = sub_gflops[i], whole_gflops[i]
            print(
                f"{kind} {name}: sub {sub:.1f} | whole {whole:.1f} ({whole / numpy:.2f}x numpy)"
                f" | deep sub {deep_sub[i]:.1f} | whole {deep_whole[i]:.1f}",
                flush=True,
            )
        print(f"{kind} numpy {numpy:.1f} GFLOPS; sub-problem {timed.size_of}", flush=True)
    return 0


def deep_spec(spec, max_flops: int):
    """The contraction with its output indices halved (largest first) and its reductions whole."""
    from optserve.kernels.spec import LoopNestSpec

    sizes = dict(spec.sizes)
    outputs = [i for i in sizes if i in spec.output_indices]
    while 2 * math.prod(sizes.values()) > max_flops and any(sizes[i] > 16 for i in outputs):
        index = max(outputs, key=lambda i: sizes[i])
        sizes[index] = -(-sizes[index] // 2)
    return LoopNestSpec(output=spec.output, inputs=spec.inputs, sizes=tuple(sizes.items()))


if __name__ == "__main__":
    sys.exit(main())
