"""The two native teams that run a parallel kernel's task table (kernels/team.py), timed interleaved on the
same kernels: the claiming team (workers claim cells, the caller runs what no worker has claimed and waits
only for cells already claimed; workers spin SPIN_PAUSES pauses, then sleep) against the OpenMP team
(GOMP_parallel: every thread runs its slot, the caller waits at the region's end for every thread; libgomp's
idle threads spin for milliseconds). On a loaded 2-core host a 2-cell OpenMP table waited a time slice a call
(matmul_bt 144x500x72: 2 GFLOPS against 97 on one thread); this measures both there and on an idle
many-core host (that the claiming team costs no speed where cores are free).

First the hand-over alone (a table of empty cells, 2, 4, 8 and `--threads` slots, one or two phases;
microseconds a call, best of 5 runs of 200 calls). Each shape: the default decision (`policy_tiles` with the
threads) compiled once, then `--rounds` rounds of the two teams one after the other (best of 5 runs of ~1 ms
of calls, as benchmarks/looptune_threads.py times), with per-call percentiles from `--calls-s` seconds of
single calls. `--guard` keeps the load guard (a host loaded past twice its CPUs runs every table on one
thread); by default both teams run whatever the load.

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/looptune_team_ab.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time

SHAPES = (
    "matmul_bt:m=144,k=500,n=72",
    "matmul_tt:m=96,k=300,n=150",
    "matmul:m=256,k=256,n=256",
    "matmul_bt:m=256,k=256,n=256",
    "batched:b=8,m=256,k=256,n=256",
    "matvec:m=2048,k=2048",
    "matmul:m=1000,k=1000,n=1000",
    "matmul_tt:m=2048,k=2048,n=2048",
)
TEAMS = {"claiming": None, "openmp": 0}  # CLAIM_CELLS per team (None: the module's own)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls-s", type=float, default=0.5)
    parser.add_argument("--guard", action="store_true")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.config import LoopTuneSettings
    from optserve.kernels import team
    from optserve.kernels.measure import measure, random_operands
    from optserve.kernels.parallel import ParallelKernel, compile_parallel
    from optserve.kernels.schedule import Schedule
    from optserve.looptune_training.suites import case_from_name
    from optserve.policies.methods import SearchMethod
    from optserve.policies.scheduler import schedule_nest

    claim_cells = team.CLAIM_CELLS
    if not args.guard:
        team.OVERSUBSCRIBED = 1e9
    print(f"threads {args.threads}, load {os.getloadavg()}, cpus {len(os.sched_getaffinity(0))}", flush=True)
    sizes = sorted({n for n in (2, 4, 8) if n < args.threads} | {args.threads})
    for slots, phases in ((n, p) for n in sizes for p in (1, 2)):  # the hand-over alone: empty cells
        table = team.TaskTable([[[] for _ in range(slots)] for _ in range(phases)])
        best = dict.fromkeys(TEAMS, float("inf"))
        for _ in range(args.rounds):
            for label, cells_limit in TEAMS.items():
                team.CLAIM_CELLS = claim_cells if cells_limit is None else cells_limit
                time.sleep(0.15)
                for _ in range(5):
                    start = time.perf_counter()
                    for _ in range(200):
                        table.run(0, 0, 0)
                    best[label] = min(best[label], (time.perf_counter() - start) / 200)
        team.CLAIM_CELLS = claim_cells
        print(
            f"empty table, {slots} slots x {phases} phase(s): "
            + ", ".join(f"{label} {seconds * 1e6:.1f} us" for label, seconds in best.items())
            + " a call",
            flush=True,
        )
    for name in args.shapes:
        spec = case_from_name(name).spec(LoopTuneSettings())
        decision = schedule_nest(spec, SearchMethod.POLICY_TILES, time_limit_s=10.0, threads=args.threads)
        kernel = compile_parallel(spec, Schedule.from_text(decision.schedule), args.threads)
        cells = kernel.threads if isinstance(kernel, ParallelKernel) else 1
        operands = random_operands(kernel)
        best = dict.fromkeys(TEAMS, 0.0)
        calls: dict[str, list[float]] = {t: [] for t in TEAMS}
        for _ in range(args.rounds):
            for label, cells_limit in TEAMS.items():
                team.CLAIM_CELLS = claim_cells if cells_limit is None else cells_limit
                time.sleep(0.15)  # the other team's idle threads back asleep
                best[label] = max(best[label], measure(kernel, runs=5, warmup_calls=2).gflops)
                end = time.perf_counter() + args.calls_s / args.rounds
                while time.perf_counter() < end:
                    calls[label].append(kernel.run_repeated(*operands, 1))
        team.CLAIM_CELLS = claim_cells
        kernel.close()
        parts = []
        for label in TEAMS:
            per = sorted(calls[label])
            p50, p90 = (spec.flops / per[int(q * (len(per) - 1))] / 1e9 for q in (0.5, 0.9))
            parts.append(f"{label} {best[label]:.1f} (p50 {p50:.1f}, p90 {p90:.1f})")
        print(
            f"{name} [{decision.actions[0] if decision.actions else 'base'}, {cells} cells]: "
            + ", ".join(parts)
            + f" GFLOPS; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
