"""The held-out suite: the service's decision vs the tile search, numpy single-thread and a naive loop nest.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_suite.py --search-time 20 --rounds 3 \
        --out docs/bench/looptune_suite.md

For every held-out case (`looptune_training.suites`, never trained on): the decision `policy_tiles` (the
service's default: learned tile cover + Q-policy, quick polish) with its wall time, Q-policy inference and JIT
time; the `tiles` search with `--search-time` seconds; then the chosen kernels, numpy's program for the
contraction (kernels/reference.py) and the base nest compiled scalar (the naive loop nest) are timed in
`--rounds` interleaved rounds, best per method, so machine drift stays out of the ratios. Writes the
markdown section, a plot beside it and the raw results (`--json-out`). The timing of a case and the run's
plumbing are looptune_training/suite_timing.py's.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from optserve.looptune_training.suite_timing import (  # noqa: E402
    NAIVE,
    SHARED_NOTE,
    add_run_arguments,
    geomean,
    merge_parts,
    recorded_command,
    run_meta,
    shard_of,
    time_case,
    write_outputs,
)


def report(data: dict, plot_path: str | None) -> str:
    meta, rows = data["meta"], data["results"]
    lines = [
        "# LoopTune on the held-out suite (every contraction kind)",
        "",
        f"- Machine: {meta['cpu']}, {meta['cores']} cores ({meta.get('note', SHARED_NOTE)}).",
        f"- Date: {meta['date']}. Command: `{meta['command']}`",
        "- policy: `optserve schedule`'s default decision `policy_tiles` (learned tile cover + Q-policy,"
        f" quick polish within {meta['polish_time_s']} s); search: `tiles` with {meta['search_time_s']} s;"
        " numpy: single-thread, the program a numpy user writes (kernels/reference.py); naive: the base"
        " nest compiled scalar. GFLOPS: best of the interleaved rounds.",
        "",
        "| kind | policy / numpy (geomean) | worst case | search / numpy | policy / naive |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    kinds = sorted({r["kind"] for r in rows}, key=[r["kind"] for r in rows].index)
    for kind in kinds:
        sel = [r for r in rows if r["kind"] == kind]
        ratios = [r["gflops"]["policy"] / r["gflops"]["numpy"] for r in sel]
        search = [r["gflops"]["search"] / r["gflops"]["numpy"] for r in sel]
        naive = [r["gflops"]["policy"] / r["gflops"][NAIVE] for r in sel]
        lines.append(
            f"| {kind} | {geomean(ratios):.2f} | {min(ratios):.2f} | {geomean(search):.2f} |"
            f" {geomean(naive):.1f} |"
        )
    all_ratios = [r["gflops"]["policy"] / r["gflops"]["numpy"] for r in rows]
    lines.append(
        f"| **all** | **{geomean(all_ratios):.2f}** | {min(all_ratios):.2f} |"
        f" {geomean([r['gflops']['search'] / r['gflops']['numpy'] for r in rows]):.2f} |"
        f" {geomean([r['gflops']['policy'] / r['gflops'][NAIVE] for r in rows]):.1f} |"
    )
    decisions = [r["decision_s"] for r in rows]
    lines += [
        "",
        f"Decision time (policy + polish, wall): median {sorted(decisions)[len(decisions) // 2]:.2f} s, max"
        f" {max(decisions):.2f} s; Q-policy inference max {max(r['inference_ms'] for r in rows):.0f} ms;"
        f" JIT of the chosen kernel max {max(r['compile_ms'] or 0 for r in rows):.0f} ms.",
        "",
        "| case | policy | search | numpy | naive | policy / numpy | decision s | policy's choice |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        g = r["gflops"]
        lines.append(
            f"| {r['case']} | {g['policy']:.1f} | {g['search']:.1f} | {g['numpy']:.1f} | {g[NAIVE]:.2f} |"
            f" {g['policy'] / g['numpy']:.2f} | {r['decision_s']:.2f} | {r['policy_choice']} |"
        )
    if plot_path:
        lines += ["", f"![GFLOPS per held-out case]({Path(plot_path).name})"]
    return "\n".join(lines) + "\n"


def plot(data: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(data["results"], key=lambda r: r["flops"])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = range(len(rows))
    for name, style in (("policy", "o-"), ("search", "s--"), ("numpy", "^-"), (NAIVE, "x:")):
        ax.plot(x, [r["gflops"][name] for r in rows], style, label=name)
    ax.set_xticks(list(x), [r["case"].replace(":", "\n", 1) for r in rows], rotation=90, fontsize=6)
    ax.set_yscale("log")
    ax.set_ylabel("GFLOPS (single thread)")
    ax.set_title("Held-out suite, ordered by flops")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser, "looptune_suite", search_time=20.0)
    parser.add_argument("--cases", default="", help="comma-separated case-name prefixes (default: all)")
    args = parser.parse_args(argv)

    from optserve.config import LoopTuneSettings
    from optserve.looptune_training.suites import HELD_OUT

    command = recorded_command(args, "looptune_suite.py", argv)
    if args.merge:
        data = merge_parts(args.merge, [c.name for c in HELD_OUT], command, args.note)
        write_outputs(data, args.out, args.json_out, report, plot)
        return 0
    settings = LoopTuneSettings()
    prefixes = [p for p in args.cases.split(",") if p]
    cases = [c for c in HELD_OUT if not prefixes or any(c.name.startswith(p) for p in prefixes)]
    cases = shard_of(cases, args.shard)
    results = []
    for case in cases:
        results.append(time_case(case, settings, args.search_time, args.rounds))
    meta = run_meta(args, command, settings)
    write_outputs({"meta": meta, "results": results}, args.out, args.json_out, report, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
