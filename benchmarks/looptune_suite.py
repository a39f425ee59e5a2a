"""The held-out suite: the service's decision vs the tile search, numpy single-thread and a naive loop nest.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_suite.py --search-time 20 --rounds 3 \
        --out docs/bench/looptune_suite.md

For every held-out case (`looptune_training.suites`, never trained on): the decision `policy_tiles` (the
service's default: learned tile cover + Q-policy, quick polish) with its wall time, Q-policy inference and JIT
time; the `tiles` search with `--search-time` seconds; then the chosen kernels, numpy's program for the
contraction (kernels/reference.py) and the base nest compiled scalar (the naive loop nest) are timed in
`--rounds` interleaved rounds, best per method, so machine drift stays out of the ratios. Writes the
markdown section, a plot beside it and the raw results (`--json-out`).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

NAIVE = "naive"
SHARED_NOTE = "shared with other work; ratios come from one run, interleaved rounds"


def shard_of(items: list, shard: str) -> list:
    """Items k, k + n, k + 2n, ... of shard "k/n": one process per core runs one shard."""
    k, n = (int(part) for part in shard.split("/"))
    if not 0 <= k < n:
        raise SystemExit(f"--shard {shard}: want k/n with 0 <= k < n")
    return items[k::n]


def merge_parts(paths: list[str], order: list[str], command: str, note: str | None) -> dict:
    """One result set from the JSON files of the shards of one run, in `order` (case names)."""
    parts = [json.loads(Path(path).read_text()) for path in paths]
    results = sorted((r for part in parts for r in part["results"]), key=lambda r: order.index(r["case"]))
    shards = sum(part["meta"].get("shards", 1) for part in parts)  # a merged file counts its own
    meta = {**parts[0]["meta"], "command": command, "shards": shards}
    if note:
        meta["note"] = note
    return {"meta": meta, "results": results}


def add_run_arguments(parser: argparse.ArgumentParser, name: str, search_time: float) -> None:
    """The options a timing run of held-out shapes shares: search budget, rounds, outputs, shards."""
    parser.add_argument("--search-time", type=float, default=search_time, help="seconds of the tiles search")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--out", default=f"docs/bench/{name}.md")
    parser.add_argument("--json-out", default=f"runs/{name}.json")
    parser.add_argument("--shard", default="0/1", help="k/n: time only every n-th case from the k-th")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="report the shards' JSON; time nothing")
    parser.add_argument("--command", help="the command to record (default: this one)")
    parser.add_argument("--note", help="how the machine was used, for the report (default: shared, one run)")


def recorded_command(args: argparse.Namespace, script: str, argv: list[str] | None) -> str:
    return args.command or f"OPENBLAS_NUM_THREADS=1 python benchmarks/{script} " + " ".join(
        argv or sys.argv[1:]
    )


def run_meta(args: argparse.Namespace, command: str, settings) -> dict:
    """What a report says about the run: machine, date, command, budgets, load."""
    from optserve.kernels.jit import host_description

    meta = {
        "cpu": host_description(),
        "cores": os.cpu_count(),
        "date": datetime.date.today().isoformat(),
        "command": command,
        "search_time_s": args.search_time,
        "polish_time_s": settings.polish_time_s,
        "rounds": args.rounds,
        "load_average": os.getloadavg()[0],  # at the end: over 1 per core, timings wait for a core
    }
    if args.note:
        meta["note"] = args.note
    return meta


def time_case(case, settings, search_time: float, rounds: int) -> dict:
    from optserve.kernels.codegen import Target
    from optserve.kernels.jit import compile_schedule, host_target
    from optserve.kernels.measure import measure
    from optserve.kernels.reference import numpy_gflops_of, numpy_program
    from optserve.kernels.schedule import Schedule
    from optserve.policies.methods import SearchMethod
    from optserve.policies.policy import decision_policy_path, load_bundle, rollout
    from optserve.policies.scheduler import schedule_nest

    spec = case.spec(settings)
    bundle = load_bundle(str(decision_policy_path()))
    inference_ms = inference_cpu_ms = 0.0  # the slowest of 3 Q-policy rollouts (10 steps each): wall, CPU
    for _ in range(3):
        start, cpu_start = time.perf_counter(), time.process_time()
        rollout(bundle.network, spec)
        inference_ms = max(inference_ms, (time.perf_counter() - start) * 1e3)
        inference_cpu_ms = max(inference_cpu_ms, (time.process_time() - cpu_start) * 1e3)
    decision = schedule_nest(spec, SearchMethod.POLICY_TILES, time_limit_s=10.0, settings=settings, threads=1)
    search = schedule_nest(spec, SearchMethod.TILES, time_limit_s=search_time, settings=settings, threads=1)
    target = host_target(settings.max_kernel_statements)
    kernels = {
        "policy": compile_schedule(spec, Schedule.from_text(decision.schedule), target=target),
        "search": compile_schedule(spec, Schedule.from_text(search.schedule), target=target),
        NAIVE: compile_schedule(spec, Schedule.base(spec), target=Target(vector_widths=())),
    }
    best = dict.fromkeys([*kernels, "numpy"], 0.0)
    try:
        for _ in range(rounds):
            for name, kernel in kernels.items():
                runs, warmup = (2, 1) if name == NAIVE else (settings.timing_repeats, 5)
                best[name] = max(best[name], measure(kernel, runs=runs, warmup_calls=warmup).gflops)
            best["numpy"] = max(best["numpy"], numpy_gflops_of(spec, runs=settings.timing_repeats))
    finally:
        for kernel in kernels.values():
            kernel.close()
    g, choice = best, decision.actions[0] if decision.actions else "(base)"
    print(
        f"{case.name}: policy {g['policy']:.1f}, search {g['search']:.1f}, numpy {g['numpy']:.1f}, naive"
        f" {g[NAIVE]:.2f} GFLOPS; policy/numpy {g['policy'] / g['numpy']:.2f}; inference"
        f" {inference_ms:.1f} ms; decision {decision.seconds:.2f} s ({choice})",
        flush=True,
    )
    return {
        "case": case.name,
        "kind": case.kind,
        "flops": spec.flops,
        "gflops": best,
        "numpy_program": numpy_program(spec)[0],
        "decision_s": decision.seconds,
        "decision_evaluations": decision.evaluations,
        "inference_ms": inference_ms,
        "inference_cpu_ms": inference_cpu_ms,
        "compile_ms": decision.compile_ms,
        "policy_choice": choice,
        "search_choice": search.actions[0] if search.actions else "(base)",
        "search_evaluations": search.evaluations,
        "search_s": search.search_seconds,
    }


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


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
        write_outputs(data, args.out, args.json_out)
        return 0
    settings = LoopTuneSettings()
    prefixes = [p for p in args.cases.split(",") if p]
    cases = [c for c in HELD_OUT if not prefixes or any(c.name.startswith(p) for p in prefixes)]
    cases = shard_of(cases, args.shard)
    results = []
    for case in cases:
        results.append(time_case(case, settings, args.search_time, args.rounds))
    write_outputs({"meta": run_meta(args, command, settings), "results": results}, args.out, args.json_out)
    return 0


def write_outputs(data: dict, out: str, json_out: str, render=None, draw=None) -> None:
    """The raw results, the plot beside the markdown (where matplotlib is installed) and the markdown."""
    render, draw = render or report, draw or plot
    Path(json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(json_out).write_text(json.dumps(data, indent=1))
    plot_path: str | None = str(Path(out).with_suffix(".png"))
    try:
        draw(data, plot_path)
    except ImportError:  # no matplotlib (the lent machine): the table alone
        plot_path = None
    text = render(data, plot_path)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
