"""GFLOPS vs size, per contraction kind: the service's decision, the tile search, numpy and a naive loop nest.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_sizes.py --search-time 10 --rounds 3 \
        --out docs/bench/looptune_sizes.md

Every kind of `looptune_training.suites` is swept over one size (squares and cubes 16..2048 with non-powers
of two, images 7..112 for the convolutions), none of them a training shape. Each point is timed as the
held-out suite's cases (looptune_training/suite_timing.py's `time_case`: decision `policy_tiles`, the
`tiles` search with `--search-time` seconds, numpy single-thread, the base nest compiled scalar; interleaved
rounds, best per method). Writes a markdown table, one plot per kind beside it (`.png`) and the raw results.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from optserve.looptune_training.suite_timing import (  # noqa: E402
    NAIVE,
    SHARED_NOTE,
    add_run_arguments,
    merge_parts,
    recorded_command,
    run_meta,
    shard_of,
    time_case,
    write_outputs,
)

METHODS = ("policy", "search", "numpy", NAIVE)
CUBES = (16, 48, 100, 256, 384, 512)  # largest: 2 * 512^3 flops, the largest timed whole (timed_flops)
SQUARES = (128, 300, 512, 1000, 2048)
IMAGES = (7, 14, 28, 56, 112)  # 32 -> 32 channels, 3x3 window


def sweep() -> dict[str, tuple[str, list]]:
    """Per kind: the swept size's label and its cases, smallest first."""
    from optserve.looptune_training.suites import case

    cubes = {
        kind: ("m = k = n", [case(kind, m=s, k=s, n=s) for s in CUBES])
        for kind in ("matmul", "matmul_at", "matmul_bt", "matmul_tt")
    }
    return {
        **cubes,
        "batched": (
            "m = k = n (8 batches)",
            [case("batched", b=8, m=s, k=s, n=s) for s in CUBES if s <= 256],
        ),
        "matvec": ("m = k", [case("matvec", m=s, k=s) for s in SQUARES]),
        "vecmat": ("k = n", [case("vecmat", k=s, n=s) for s in SQUARES]),
        "conv_nchw": (
            "image y = x",
            [case("conv_nchw", n=1, f=32, c=32, y=s, x=s, r=3, s=3) for s in IMAGES],
        ),
        "conv_nhwc": (
            "image y = x",
            [case("conv_nhwc", n=1, y=s, x=s, c=32, f=32, r=3, s=3) for s in IMAGES],
        ),
    }


def swept_size(case) -> int:
    sizes = dict(case.sizes)
    return sizes.get("m", sizes.get("k", sizes.get("y")))


def plot(data: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["kind"] for r in data["results"]))
    columns = 3
    fig, axes = plt.subplots((len(kinds) + columns - 1) // columns, columns, figsize=(13, 11), squeeze=False)
    styles = {"policy": "o-", "search": "s--", "numpy": "^-", NAIVE: "x:"}
    labels = {
        "policy": "policy (optserve schedule)",
        "search": f"tiles search {data['meta']['search_time_s']:g} s",
        "numpy": "numpy 1 thread",
        NAIVE: "naive scalar nest",
    }
    for ax, kind in zip(axes.flat, kinds, strict=False):
        rows = [r for r in data["results"] if r["kind"] == kind]
        sizes = [r["size"] for r in rows]
        for method in METHODS:
            ax.plot(sizes, [r["gflops"][method] for r in rows], styles[method], label=labels[method])
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes], fontsize=7)
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_title(f"{kind}: {rows[0]['einsum']}", fontsize=8)
        ax.set_xlabel(rows[0]["size_label"], fontsize=8)
        ax.set_ylabel("GFLOPS", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(kinds) :]:
        ax.axis("off")
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4)
    meta = data["meta"]
    fig.suptitle(f"LoopTune, GFLOPS vs size, single thread ({meta['cpu']}, {meta['date']})", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(path, dpi=100)


def report(data: dict, plot_path: str | None) -> str:
    meta, rows = data["meta"], data["results"]
    inference = [r["inference_ms"] for r in rows]
    jit = [r["compile_ms"] or 0.0 for r in rows]
    decisions = [r["decision_s"] for r in rows]
    budget = ""
    if meta["search_time_s"] < 60:
        budget = (
            f" (the issue asks for 60 s: {len(rows)} shapes x 60 s is more than a shared 2-core machine"
            " affords; benchmarks/looptune_suite_lent.sh runs 60 s on the lent 16-core machine)"
        )
    lines = [
        "# LoopTune: GFLOPS vs size, every contraction kind",
        "",
        f"- Machine: {meta['cpu']}, {meta['cores']} cores ({meta.get('note', SHARED_NOTE)})."
        f" Date: {meta['date']}.",
        f"- Command: `{meta['command']}`",
        "- policy: `optserve schedule`'s default decision `policy_tiles`; search: the `tiles` search with"
        f" {meta['search_time_s']:g} s per shape{budget}; numpy: single-thread (kernels/reference.py); naive:"
        f" the base nest compiled scalar. GFLOPS: best of {meta['rounds']} interleaved rounds.",
        f"- Q-policy inference (10-step rollout, slowest of 3 per shape): wall median"
        f" {statistics.median(inference):.1f} ms, max {max(inference):.1f} ms; CPU time max"
        f" {max(r['inference_cpu_ms'] for r in rows):.1f} ms (goal < 50 ms; load average at the end"
        f" {meta.get('load_average', float('nan')):.1f} on {meta['cores']} cores). Decision"
        f" (policy + polish, wall): median {statistics.median(decisions):.2f} s, max {max(decisions):.2f} s."
        f" JIT of the chosen kernel (wall, inside the decision): median {statistics.median(jit):.0f} ms, max"
        f" {max(jit):.0f} ms.",
        "",
    ]
    if plot_path:
        lines += [f"![GFLOPS vs size per kind]({Path(plot_path).name})", ""]
    lines += [
        "| kind | size | policy | search | numpy | naive | policy / numpy | policy's choice |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        g = r["gflops"]
        lines.append(
            f"| {r['kind']} | {r['size']} | {g['policy']:.1f} | {g['search']:.1f} | {g['numpy']:.1f} |"
            f" {g[NAIVE]:.2f} | {g['policy'] / g['numpy']:.2f} | {r['policy_choice']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, "looptune_sizes", search_time=10.0)
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    args = parser.parse_args(argv)

    from optserve.config import LoopTuneSettings
    from optserve.looptune_training.suites import training_suite

    command = recorded_command(args, "looptune_sizes.py", argv)
    wanted = [k for k in args.kinds.split(",") if k]
    points = [
        (case, label)
        for kind, (label, cases) in sweep().items()
        if not wanted or kind in wanted
        for case in cases
    ]
    if args.merge:
        data = merge_parts(args.merge, [case.name for case, _ in points], command, args.note)
        write_outputs(data, args.out, args.json_out, report, plot)
        return 0
    settings = LoopTuneSettings()
    trained = {c.name for c in training_suite()}
    results = []
    for case, label in shard_of(points, args.shard):
        if case.name in trained:
            raise SystemExit(f"{case.name} is a training shape; the sweep must be held out")
        row = time_case(case, settings, args.search_time, args.rounds)
        results.append({**row, "size": swept_size(case), "size_label": label, "einsum": case.einsum})
    write_outputs(
        {"meta": run_meta(args, command, settings), "results": results}, args.out, args.json_out, report, plot
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
