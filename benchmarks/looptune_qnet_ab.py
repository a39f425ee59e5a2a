"""Before/after on the held-out suite: the decision with one Q-network bundle against another, side by side.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_qnet_ab.py --before models/looptune/policy.pt \
        --after models/looptune/tile_policy.pt --rounds 3 --out docs/bench/looptune_qnet_ab.md

For every held-out case (`looptune_training.suites`): for each bundle, the Q-policy's inference time (slowest
of 3 rollouts), its rollout alone (the network's final schedule, nothing measured) and the decision
`policy_tiles` (the service's default: the bundle's network with the cover beside it, quick polish, budget
`looptune.polish_time_s`); then every chosen kernel and numpy's program (kernels/reference.py) are timed
in `--rounds` interleaved rounds, best per kernel, so machine drift stays out of the ratios. Both decisions
use the bundled cover (models/looptune/tiles.json); only the network differs. The bundles decide in turns
(before first on even cases, after first on odd ones).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from optserve.looptune_training.suite_timing import (  # noqa: E402
    geomean,
    recorded_command,
    run_meta,
    write_outputs,
)

BUNDLES = ("before", "after")


@contextlib.contextmanager
def serving(policy_path: str):
    """The decision reads the network at `policy_path` (the service: policy.decision_policy_path)."""
    from optserve.policies import policy

    default = policy.decision_policy_path
    policy.decision_policy_path = lambda: Path(policy_path)
    try:
        yield
    finally:
        policy.decision_policy_path = default


def time_case(case, settings, paths: dict[str, str], rounds: int, turn: int = 0) -> dict:
    from optserve.kernels.jit import compile_schedule, host_target
    from optserve.kernels.measure import measure
    from optserve.kernels.reference import numpy_gflops_of
    from optserve.kernels.schedule import Schedule
    from optserve.policies.methods import SearchMethod
    from optserve.policies.policy import load_bundle, rollout
    from optserve.policies.scheduler import schedule_nest

    spec = case.spec(settings)
    target = host_target(settings.max_kernel_statements)
    row: dict = {"case": case.name, "kind": case.kind, "flops": spec.flops}
    schedules = {}
    for name in BUNDLES if turn % 2 == 0 else BUNDLES[::-1]:
        bundle = load_bundle(paths[name])
        inference_ms = inference_cpu_ms = 0.0  # wall and CPU: on a loaded machine the wall waits for a core
        for _ in range(3):
            start, cpu_start = time.perf_counter(), time.process_time()
            alone = rollout(bundle.network, spec, target=target)
            inference_ms = max(inference_ms, (time.perf_counter() - start) * 1e3)
            inference_cpu_ms = max(inference_cpu_ms, (time.process_time() - cpu_start) * 1e3)
        cpu_start = time.process_time()
        with serving(paths[name]):
            decision = schedule_nest(
                spec, SearchMethod.POLICY_TILES, time_limit_s=10.0, settings=settings, threads=1
            )
        decision_cpu_s = time.process_time() - cpu_start
        schedules[f"{name}_alone"] = alone.final.schedule
        schedules[name] = Schedule.from_text(decision.schedule)
        row[name] = {
            "inference_ms": inference_ms,
            "inference_cpu_ms": inference_cpu_ms,
            "decision_s": decision.seconds,
            "decision_cpu_s": decision_cpu_s,
            "evaluations": decision.evaluations,
            "choice": decision.actions[0] if decision.actions else "(base)",
            "alone_actions": " ".join(alone.actions),
        }
    kernels = {}
    for schedule in schedules.values():
        kernels.setdefault(schedule.compute_key(), compile_schedule(spec, schedule, target=target))
    best = dict.fromkeys([*kernels, "numpy"], 0.0)
    try:
        for _ in range(rounds):
            for key, kernel in kernels.items():
                timing = measure(kernel, runs=settings.timing_repeats, warmup_calls=5)
                best[key] = max(best[key], timing.gflops)
            best["numpy"] = max(best["numpy"], numpy_gflops_of(spec, runs=settings.timing_repeats))
    finally:
        for kernel in kernels.values():
            kernel.close()
    row["gflops"] = {key: best[s.compute_key()] for key, s in schedules.items()} | {"numpy": best["numpy"]}
    g = row["gflops"]
    print(
        f"{case.name}: numpy {g['numpy']:.1f}; decision before {g['before']:.1f} ({row['before']['choice']},"
        f" {row['before']['decision_s']:.2f} s), after {g['after']:.1f} ({row['after']['choice']},"
        f" {row['after']['decision_s']:.2f} s); alone before {g['before_alone']:.1f}, after"
        f" {g['after_alone']:.1f} GFLOPS",
        flush=True,
    )
    return row


def summary(rows: list[dict], key: str) -> dict:
    ratios = {r["case"]: r["gflops"][key] / r["gflops"]["numpy"] for r in rows}
    return {
        "geomean": geomean(list(ratios.values())),
        "worst": min(ratios.values()),
        "worst_case": min(ratios, key=ratios.get),
        "512^3": ratios.get("matmul:m=512,k=512,n=512"),
    }


def report(data: dict, plot_path: str | None) -> str:
    meta, rows = data["meta"], data["results"]
    lines = [
        "# Q-network before/after on the held-out suite",
        "",
        f"- Machine: {meta['cpu']}, {meta['cores']} cores (shared with other work, load average"
        f" {meta['load_average']:.1f} at the end; ratios come from one run, interleaved rounds).",
        f"- Date: {meta['date']}. Command: `{meta['command']}`",
        f"- before: `{meta['before']}`; after: `{meta['after']}`. decision: `policy_tiles` with the bundle"
        f" (quick polish within {meta['polish_time_s']} s); alone: the network's rollout, not measured"
        f" while deciding. GFLOPS: best of {meta['rounds']} interleaved rounds; ratios to numpy (1 thread).",
        "",
        "| what | geomean vs numpy | worst case | 512^3 | decision s median / max (max CPU s) |"
        " inference ms max (max CPU ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key in ("before", "after", "before_alone", "after_alone"):
        s = summary(rows, key)
        bundle = key.removesuffix("_alone")
        if key in BUNDLES:
            times = sorted(r[bundle]["decision_s"] for r in rows)
            cpu = max(r[bundle]["decision_cpu_s"] for r in rows)
            decision = f"{times[len(times) // 2]:.2f} / {times[-1]:.2f} ({cpu:.2f})"
        else:
            decision = "-"
        inference = max(r[bundle]["inference_ms"] for r in rows)
        inference_cpu = max(r[bundle]["inference_cpu_ms"] for r in rows)
        label = f"decision, {bundle}" if key in BUNDLES else f"network alone, {bundle}"
        lines.append(
            f"| {label} | {s['geomean']:.2f} | {s['worst']:.2f} ({s['worst_case']}) |"
            f" {s['512^3'] or float('nan'):.2f} | {decision} | {inference:.1f} ({inference_cpu:.1f}) |"
        )
    lines += [
        "",
        "| case | numpy | before | after | before alone | after alone | before's choice | after's choice |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        g = r["gflops"]
        lines.append(
            f"| {r['case']} | {g['numpy']:.1f} | {g['before']:.1f} | {g['after']:.1f}"
            f" | {g['before_alone']:.1f} | {g['after_alone']:.1f}"
            f" | {r['before']['choice']} | {r['after']['choice']} |"
        )
    return "\n".join(lines) + "\n"


def no_plot(data: dict, path: str) -> None:
    raise ImportError("no plot for the before/after table")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", default="models/looptune/policy.pt", help="the network to compare against (.pt)"
    )
    parser.add_argument("--after", default="models/looptune/tile_policy.pt", help="the new network (.pt)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--cases", default="", help="comma-separated case-name prefixes (default: all)")
    parser.add_argument("--out", default="docs/bench/looptune_qnet_ab.md")
    parser.add_argument("--json-out", default="runs/looptune_qnet_ab.json")
    parser.add_argument("--command", help="the command to record (default: this one)")
    parser.add_argument("--note", help="how the machine was used")
    args = parser.parse_args(argv)
    args.search_time = None  # no tile search in this comparison

    from optserve.config import LoopTuneSettings
    from optserve.looptune_training.suites import HELD_OUT

    settings = LoopTuneSettings()
    paths = {"before": args.before, "after": args.after}
    prefixes = [p for p in args.cases.split(",") if p]
    cases = [c for c in HELD_OUT if not prefixes or any(c.name.startswith(p) for p in prefixes)]
    results = [time_case(case, settings, paths, args.rounds, turn) for turn, case in enumerate(cases)]
    meta = run_meta(args, recorded_command(args, "looptune_qnet_ab.py", argv), settings) | paths
    write_outputs({"meta": meta, "results": results}, args.out, args.json_out, render=report, draw=no_plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
