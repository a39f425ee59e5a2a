"""Tile templates on the CNN layers, one by one, against PyTorch's convolution (the layers of the
benchmark's conv groups, in NCHW or with `--kind conv_nhwc` in NHWC).

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_nchw_probe.py --layers conv5 --templates 4x4rv-k64-r64

For each layer of looptune_training/suites.py's CONVS (selected by a word of its name) and each template
(names as kernels/tiling.py TileTemplate writes them), the template's kernel on the whole layer (compiled
for `--threads`) and torch.nn.functional.conv2d are timed in interleaved rounds, best per kernel; with
`--decide`, the default decision (`policy_tiles`) too, and what it chose and on which sizes; with
`--both-ways`, each template whose outer loops may run inside its tile loops (kernels/tiling.py
`weights_inside`) both ways, `/in` and `/out`. Prints one line
per kernel; `--json-out` keeps them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from optserve.looptune_training.suite_timing import torch_conv
from optserve.looptune_training.suites import CONVS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", nargs="+", default=["conv1_2", "conv5", "reduce"])
    parser.add_argument("--templates", nargs="*", default=[])
    parser.add_argument("--kind", default="conv_nchw", choices=("conv_nchw", "conv_nhwc"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decide", action="store_true", help="also the default decision's kernel")
    parser.add_argument(
        "--both-ways", action="store_true", help="each template with the outer loops inside its tiles and not"
    )
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first)

    from optserve.config import LoopTuneSettings
    from optserve.kernels.measure import best_call_seconds, measure
    from optserve.kernels.parallel import compile_parallel
    from optserve.kernels.schedule import Schedule
    from optserve.kernels.tiling import TileTemplate, tiled_schedule
    from optserve.looptune_training.suites import case
    from optserve.policies.methods import SearchMethod
    from optserve.policies.scheduler import schedule_nest

    settings = LoopTuneSettings()
    rows = []
    for name, c, f, image, window in CONVS:
        if not any(word in name for word in args.layers):
            continue
        sizes = {"n": 1, "f": f, "c": c, "y": image, "x": image, "r": window, "s": window}
        spec = case(args.kind, **sizes).spec(settings)
        kernels = {}
        for template in args.templates:
            schedules = {template: tiled_schedule(spec, TileTemplate.from_name(template), 16)}
            if args.both_ways:  # the image columns inside the tile loops and outside, where that differs
                ways = {
                    f"{template}/{w}": tiled_schedule(
                        spec, TileTemplate.from_name(template), 16, inside=w == "in"
                    )
                    for w in ("out", "in")
                }
                if len({s.compute_key() for s in ways.values()}) > 1:
                    schedules = ways
            for label, schedule in schedules.items():
                start = time.perf_counter()
                kernels[label] = compile_parallel(spec, schedule, args.threads)
                print(f"{name} {label}: compiled in {time.perf_counter() - start:.2f} s", flush=True)
        if args.decide:
            start = time.perf_counter()
            decision = schedule_nest(spec, SearchMethod.POLICY_TILES, time_limit_s=10.0, threads=args.threads)
            seconds = time.perf_counter() - start
            label = f"decision {decision.actions[0] if decision.actions else '(base)'}"
            print(f"{name} {label}: {seconds:.2f} s, timed on {decision.timed_sizes}", flush=True)
            kernels[label] = compile_parallel(spec, Schedule.from_text(decision.schedule), args.threads)
        conv = torch_conv(args.kind, spec.size_of, args.threads)
        best = dict.fromkeys([*kernels, "torch"], 0.0)
        for _ in range(args.rounds):
            for label, kernel in kernels.items():
                timing = measure(kernel, runs=5, warmup_calls=2, run_seconds=1e-3)
                best[label] = max(best[label], timing.gflops)
            best["torch"] = max(best["torch"], spec.flops / best_call_seconds(conv, 5) / 1e9)
        for label, kernel in kernels.items():
            kernel.close()
            print(f"{name} {label}: {best[label]:.1f} GFLOPS ({best[label] / best['torch']:.2f}x torch)")
            rows.append({"layer": name, "kernel": label, "gflops": best[label], "torch": best["torch"]})
        print(f"{name} torch: {best['torch']:.1f} GFLOPS", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
