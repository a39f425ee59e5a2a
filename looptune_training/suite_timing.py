"""Timing runs of held-out loop nests: what benchmarks/looptune_suite.py, looptune_sizes.py and
looptune_qnet_ab.py share.

`time_case` times one case the way the suite does: the decision `policy_tiles` (the service's default: learned
tile cover + Q-policy, quick polish) with its wall time, Q-policy inference and JIT time; the `tiles` search
within `search_time` seconds; then the chosen kernels, numpy's program for the contraction
(kernels/reference.py) and the base nest compiled scalar (the naive loop nest) in `rounds` interleaved rounds,
best per method, so machine drift stays out of the ratios. The rest is a run's plumbing: its options,
shards and their merge, the metadata a report states (machine, date, command, load) and the outputs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path

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


def write_outputs(data: dict, out: str, json_out: str, render, draw) -> None:
    """The raw results, the plot beside the markdown (where matplotlib is installed: `draw(data, path)`) and
    the markdown (`render(data, plot_path)`)."""
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


def torch_conv(kind: str, sizes: dict[str, int], threads: int):
    """PyTorch's convolution of the case (stride 1, no padding), channels_last for the NHWC kind."""
    import torch

    torch.set_num_threads(threads)
    rng = torch.Generator().manual_seed(0)
    n, c, f, r, s = (sizes[i] for i in "ncfrs")
    image = torch.rand((n, c, sizes["y"] + r - 1, sizes["x"] + s - 1), generator=rng) * 2 - 1
    weight = torch.rand((f, c, r, s), generator=rng) * 2 - 1
    if kind == "conv_nhwc":
        image = image.contiguous(memory_format=torch.channels_last)
        weight = weight.contiguous(memory_format=torch.channels_last)
    return lambda: torch.nn.functional.conv2d(image, weight)
