"""LoopTune at 1 thread and at all threads: the held-out suite, a sizes sweep to 2048 and CNN convolutions.

    python benchmarks/looptune_threads.py --out docs/bench/looptune_threads.md

For every case the service's default decision (`policy_tiles`, with `threads` set) is asked for the schedule
(its wall time is the decision time), then the chosen kernel (kernels/parallel.py: cells of one or two output
indices, run by an OpenMP team, kernels/team.py) and the reference are timed in `--rounds` interleaved rounds,
best per method: numpy's program for the contraction (kernels/reference.py: OpenBLAS matmul, im2col +
tensordot for convolutions) and, for the 2-D convolutions, PyTorch's CPU convolution
(`torch.nn.functional.conv2d`, oneDNN, stride 1, no padding: the same sums), each layer in both layouts: NCHW
(`O[n,f,y,x] += I[n,c,y+r,x+s] * W[f,c,r,s]`, torch's default) and NHWC (`O[n,y,x,f] += I[n,y+r,x+s,c] *
W[r,s,c,f]`, torch's `channels_last`, where oneDNN and our kernels both vectorize along channels). OpenBLAS
fixes its thread count when it loads, so each thread count runs in a process of its own (`--threads`, with
OPENBLAS_NUM_THREADS and torch.set_num_threads set to it); without `--threads` this script runs them one after
the other (1, then every CPU) and writes one report from both (`--json-out` keeps the raw results).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CUBES = (256, 1000, 2048)
GROUPS = ("held-out", "sweep", "conv NCHW", "conv NHWC")
SQUARES = (1000, 2048)
SETTLE_S = 0.15  # between timing one library's threads and the next's (time_one)


def cases() -> list[tuple[str, object, str | None]]:
    """(group, case, the conv layer's name or None), in report order."""
    from optserve.looptune_training.suites import CONVS, HELD_OUT, case

    out: list[tuple[str, object, str | None]] = [("held-out", c, None) for c in HELD_OUT]
    for kind in ("matmul", "matmul_at", "matmul_bt", "matmul_tt"):
        out += [("sweep", case(kind, m=s, k=s, n=s), None) for s in CUBES]
    out += [("sweep", case("batched", b=8, m=s, k=s, n=s), None) for s in (256, 512)]
    out += [("sweep", case("matvec", m=s, k=s), None) for s in SQUARES]
    out += [("sweep", case("vecmat", k=s, n=s), None) for s in SQUARES]
    for name, c, f, image, window in CONVS:
        sizes = {"n": 1, "f": f, "c": c, "y": image, "x": image, "r": window, "s": window}
        out.append(("conv NCHW", case("conv_nchw", **sizes), name))
        out.append(("conv NHWC", case("conv_nhwc", **sizes), name))
    return out


def time_one(group: str, case, layer: str | None, threads: int, rounds: int) -> dict:
    import numpy as np

    from optserve.config import LoopTuneSettings
    from optserve.kernels.measure import best_call_seconds, measure
    from optserve.kernels.parallel import ParallelKernel, compile_parallel
    from optserve.kernels.reference import numpy_program
    from optserve.kernels.schedule import Schedule
    from optserve.looptune_training.suite_timing import torch_conv
    from optserve.policies.decision_cache import MemoryDecisionCache
    from optserve.policies.methods import SearchMethod
    from optserve.policies.scheduler import schedule_nest

    settings = LoopTuneSettings()
    spec = case.spec(settings)
    cache = MemoryDecisionCache()
    start = time.perf_counter()
    decision = schedule_nest(spec, SearchMethod.POLICY_TILES, time_limit_s=10.0, threads=threads, cache=cache)
    decision_s = time.perf_counter() - start
    start = time.perf_counter()  # the same request again: answered from the decision cache
    repeated = schedule_nest(spec, SearchMethod.POLICY_TILES, time_limit_s=10.0, threads=threads, cache=cache)
    repeated_s = time.perf_counter() - start
    assert repeated.cached and repeated.schedule == decision.schedule
    kernel = compile_parallel(spec, Schedule.from_text(decision.schedule), threads)
    _, program = numpy_program(spec)
    rng = np.random.default_rng(0)
    lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.inputs)
    references = {"numpy": lambda: program(lhs, rhs)}
    if layer:
        references["torch"] = torch_conv(case.kind, spec.size_of, threads)
    best = dict.fromkeys(["optserve", *references], 0.0)
    # idle threads of one library spin for a while after its last call (OpenBLAS ~0.1 s, libgomp ~10 ms)
    # and would take cores from the next one timed: each waits until the other's have gone to sleep
    settle_s = SETTLE_S if threads > 1 else 0.0
    try:
        for _ in range(rounds):
            time.sleep(settle_s)
            timing = measure(kernel, runs=5, warmup_calls=2, run_seconds=1e-3)
            best["optserve"] = max(best["optserve"], timing.gflops)
            for name, call in references.items():
                time.sleep(settle_s)
                best[name] = max(best[name], spec.flops / best_call_seconds(call, 5) / 1e9)
    finally:
        kernel.close()
    used = kernel.threads if isinstance(kernel, ParallelKernel) else 1
    ratios = {name: best["optserve"] / best[name] for name in references}
    print(
        f"[{threads} thr] {case.name}{f' ({layer})' if layer else ''}: optserve {best['optserve']:.1f}"
        f" GFLOPS on {used} thread(s), "
        + ", ".join(f"{n} {best[n]:.1f} ({ratios[n]:.2f}x)" for n in references)
        + f"; decision {decision_s:.2f} s, timed {decision.timed_sizes}",
        flush=True,
    )
    return {
        "group": group,
        "case": case.name,
        "kind": case.kind,
        "layer": layer,
        "flops": spec.flops,
        "threads": threads,
        "kernel_threads": used,
        "gflops": best,
        "decision_s": decision_s,
        "repeated_decision_s": repeated_s,
        "timed_sizes": decision.timed_sizes,
        "timed_whole": decision.timed_sizes == spec.size_of,
        "choice": decision.actions[0] if decision.actions else "(base)",
    }


def run_threads(args: argparse.Namespace) -> dict:
    from optserve.kernels.spec import LoopNestSpec
    from optserve.policies.scheduler import schedule_nest

    # a first decision loads the policy (torch) and measures the core's peak: not what a decision costs
    schedule_nest(
        LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 64, "k": 64, "n": 64}), "policy_tiles"
    )
    chosen = [item for item in cases() if not args.groups or item[0].split()[0] in args.groups]
    results = [time_one(g, c, layer, args.threads, args.rounds) for g, c, layer in chosen]
    return {"threads": args.threads, "load_average_end": os.getloadavg(), "results": results}


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def report(data: dict) -> str:
    meta = data["meta"]
    runs = data["runs"]
    lines = [
        "# LoopTune at 1 thread and at all threads: held-out suite, sizes to 2048, convolutions vs PyTorch",
        "",
        f"- Machine: {meta['cpu']}, {meta['cores']} cores; {meta['note']}. Load average (1, 5, 15 min)"
        f" at the start {_load(meta['load_average_start'])}, after each thread count "
        + ", ".join(f"{run['threads']} thr: {_load(run['load_average_end'])}" for run in runs)
        + f". Date: {meta['date']}.",
        f"- Command: `{meta['command']}`",
        "- optserve: the default decision (`policy_tiles`, the request's `threads`), its kernel run on up to"
        " that many threads (kernels/parallel.py); numpy: kernels/reference.py's program with OpenBLAS on"
        " that many threads; torch: `torch.nn.functional.conv2d` (oneDNN) with `torch.set_num_threads`."
        f" GFLOPS: best of {meta['rounds']} interleaved rounds. Decision: wall time of `schedule_nest`;"
        " repeated: the same request again, answered from the decision cache (policies/decision_cache.py).",
        "- Read the all-thread rows with the load averages: where the machine's cores are busy with other"
        " work, a library whose threads meet at spinning barriers (OpenBLAS, oneDNN's OpenMP) waits a"
        " scheduler time slice per call, so its GFLOPS there measure the load; a kernel of ours runs on one"
        " thread below MIN_BLOCK_WORK per thread (kernels/parallel.py: 1 MFLOP, or 128 KiB streamed, where"
        " an OpenMP team runs the cells), and the column 'threads used' says how many it ran on.",
        "",
        "## Summary",
        "",
        "| threads | group | shapes | geomean vs numpy | worst vs numpy (kind) | geomean vs torch | worst vs"
        " torch | decision p50 | decision max | repeated max |",
        "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        for group in GROUPS:
            rows = [r for r in run["results"] if r["group"] == group]
            if not rows:  # a run of some groups only (--groups)
                continue
            numpy = [r["gflops"]["optserve"] / r["gflops"]["numpy"] for r in rows]
            worst = min(zip(numpy, rows, strict=True), key=lambda p: p[0])
            torch = [r["gflops"]["optserve"] / r["gflops"]["torch"] for r in rows if "torch" in r["gflops"]]
            decisions = [r["decision_s"] for r in rows]
            repeated = [r.get("repeated_decision_s", float("nan")) for r in rows]
            lines.append(
                f"| {run['threads']} | {group} | {len(rows)} | {geomean(numpy):.2f}x | {worst[0]:.2f}x"
                f" ({worst[1]['case']}) | {f'{geomean(torch):.2f}x' if torch else '-'} |"
                f" {f'{min(torch):.2f}x' if torch else '-'} | {statistics.median(decisions):.2f} s |"
                f" {max(decisions):.2f} s | {max(repeated) * 1e3:.1f} ms |"
            )
        kinds: dict[str, list[float]] = {}
        for r in run["results"]:
            kinds.setdefault(r["kind"], []).append(r["gflops"]["optserve"] / r["gflops"]["numpy"])
        lines.append(
            f"| {run['threads']} | per kind (all groups) | | "
            + ", ".join(f"{k} {geomean(v):.2f}" for k, v in kinds.items())
            + " | | | | | | |"
        )
    lines += [
        "",
        "## Every shape",
        "",
        "| threads | group | case | optserve GFLOPS (threads used) | numpy | torch | vs numpy | vs torch |"
        " decision | timed on | choice |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for run in runs:
        for r in run["results"]:
            g = r["gflops"]
            torch = g.get("torch")
            timed = ",".join(f"{k}={v}" for k, v in (r["timed_sizes"] or {}).items())
            name = r["case"] + (f" ({r['layer']})" if r["layer"] else "")
            torch_gflops, vs_torch = (f"{torch:.1f}", f"{g['optserve'] / torch:.2f}") if torch else ("-", "-")
            lines.append(
                f"| {r['threads']} | {r['group']} | {name} | {g['optserve']:.1f} ({r['kernel_threads']}) |"
                f" {g['numpy']:.1f} | {torch_gflops} | {g['optserve'] / g['numpy']:.2f} | {vs_torch} |"
                f" {r['decision_s']:.2f} s |"
                f" {'whole' if r['timed_whole'] else timed} | {r['choice']} |"
            )
    return "\n".join(lines) + "\n"


def _load(values) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="time at this many threads only (one process)")
    parser.add_argument("--part", help="with --threads: write that run's JSON here")
    parser.add_argument("--groups", nargs="+", choices=("held-out", "sweep", "conv"), help="default: all")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--out", default="docs/bench/looptune_threads.md")
    parser.add_argument("--json-out", default="runs/looptune_threads.json")
    parser.add_argument("--note", default="shared with other work and loaded (see the load averages)")
    parser.add_argument(
        "--report-only", action="store_true", help="write --out from --json-out; time nothing"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        Path(args.out).write_text(report(json.loads(Path(args.json_out).read_text())))
        return 0
    if args.threads:
        import torch  # noqa: F401  (loaded before the kernels: its OpenMP runtime first)

        Path(args.part).write_text(json.dumps(run_threads(args)))
        return 0
    from optserve.kernels.jit import host_description
    from optserve.kernels.parallel import default_threads

    cores = default_threads()
    meta = {
        "cpu": host_description(),
        "cores": cores,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/looptune_threads.py " + " ".join(argv or sys.argv[1:]),
        "rounds": args.rounds,
        "note": args.note,
        "load_average_start": os.getloadavg(),
    }
    runs = []
    for threads in sorted({1, cores}):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
        part = Path(args.json_out).with_suffix(f".{threads}.json")
        part.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, __file__, "--threads", str(threads), "--rounds", str(args.rounds)]
        command += ["--part", str(part)] + (["--groups", *args.groups] if args.groups else [])
        subprocess.run(command, env=env, check=True)
        runs.append(json.loads(part.read_text()))
    data = {"meta": meta, "runs": runs}
    Path(args.json_out).write_text(json.dumps(data, indent=1))
    Path(args.out).write_text(report(data))
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
