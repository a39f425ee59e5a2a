"""Where a parallel kernel's time goes on all cores: hand-over, packed copies, the cells' nests, vs numpy.

    OPENBLAS_NUM_THREADS=16 python benchmarks/looptune_parallel_profile.py --threads 16

For each shape the default decision (`policy_tiles` at `--threads`) picks the schedule; its ParallelKernel
(kernels/parallel.py) is timed whole, then by phase: an empty table (the team's hand-over alone), the
packing phase alone, the nests alone (on the buffers the packing left), and the same cells on Python
threads instead of the OpenMP team (kernels/team.py); then the kernel on one thread and numpy at
OPENBLAS_NUM_THREADS. Microseconds per call, best of `--runs` runs of ~2 ms each, each measurement 0.15 s
after the one before (idle OpenBLAS and libgomp threads spin for a while and take cores from the next).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

SHAPES = (
    ("matmul", {"m": 256, "k": 256, "n": 256}),
    ("matmul", {"m": 512, "k": 512, "n": 512}),
    ("matmul", {"m": 384, "k": 96, "n": 640}),
    ("matmul", {"m": 2048, "k": 2048, "n": 2048}),
    ("matmul_bt", {"m": 1000, "k": 1000, "n": 1000}),
    ("matmul_at", {"m": 320, "k": 200, "n": 96}),
    ("batched", {"b": 8, "m": 256, "k": 256, "n": 256}),
    ("matvec", {"m": 1024, "k": 1024}),
    ("matvec", {"m": 2048, "k": 2048}),
    ("vecmat", {"k": 2048, "n": 2048}),
)

SETTLE_S = 0.15


def best_us(call, runs: int) -> float:
    from optserve.kernels.measure import best_call_seconds

    time.sleep(SETTLE_S)  # the idle threads of what ran before (OpenBLAS, the team) stop spinning first
    return best_call_seconds(call, runs, run_seconds=2e-3, budget_s=5.0) * 1e6


def profile(kind: str, sizes: dict[str, int], threads: int, runs: int) -> dict:
    import numpy as np

    from optserve.kernels import team
    from optserve.kernels.parallel import ParallelKernel, compile_parallel
    from optserve.kernels.reference import numpy_program
    from optserve.kernels.schedule import Schedule
    from optserve.kernels.spec import LoopNestSpec
    from optserve.looptune_training.suites import KINDS
    from optserve.policies.scheduler import schedule_nest

    spec = LoopNestSpec.parse(KINDS[kind], sizes)
    decision = schedule_nest(spec, "policy_tiles", time_limit_s=10.0, threads=threads)
    schedule = Schedule.from_text(decision.schedule)
    rng = np.random.default_rng(0)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    pointers = (out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)
    _, program = numpy_program(spec)
    row = {"case": f"{kind}:{spec.sizes_text()}", "schedule": decision.actions[:1], "flops": spec.flops}
    kernel = compile_parallel(spec, schedule, threads)
    single = compile_parallel(spec, schedule, 1)
    python = compile_parallel(spec, schedule, threads, native=False)
    try:
        row["whole"] = best_us(lambda: kernel(out, lhs, rhs), runs)
        row["one_thread"] = best_us(lambda: single(out, lhs, rhs), runs)
        row["numpy"] = best_us(lambda: program(lhs, rhs), runs)
        if isinstance(kernel, ParallelKernel):
            row["grid"] = [(i, len(b), b[0].size) for i, b in kernel.grid.cuts]
            row["cells"] = kernel.threads
            phases = kernel.table.phases
            empty = team.TaskTable([[[] for _ in phases[-1]]])
            row["hand_over"] = best_us(lambda: empty.run(*pointers), runs)
            if len(phases) == 2:
                packs, nests = team.TaskTable(phases[:1]), team.TaskTable(phases[1:])
                row["packing"] = best_us(lambda: packs.run(*pointers), runs)
                row["nests"] = best_us(lambda: nests.run(*pointers), runs)
            row["python_threads"] = best_us(lambda: python(out, lhs, rhs), runs)
    finally:
        for k in (kernel, single, python):
            k.close()
    row["vs_numpy"] = row["numpy"] / row["whole"]
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json-out")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (its OpenMP runtime first, as in the service)

    from optserve.kernels import team

    print(f"threads {args.threads}, OpenMP team: {team.native_available()}, load {os.getloadavg()}")
    rows = [profile(kind, sizes, args.threads, args.runs) for kind, sizes in SHAPES]
    print(f"load at the end {os.getloadavg()}")
    columns = "whole us | hand-over | packing | nests | python threads | 1 thread | numpy | vs numpy"
    print(f"| case | grid | {columns} |")
    for r in rows:
        grid = " x ".join(f"{i}:{n}" for i, n, _ in r.get("grid", [])) or "1"
        cells = [
            f"{r.get(k, float('nan')):.0f}"
            for k in ("whole", "hand_over", "packing", "nests", "python_threads", "one_thread", "numpy")
        ]
        print(f"| {r['case']} | {grid} | " + " | ".join(cells) + f" | {r['vs_numpy']:.2f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"threads": args.threads, "load": os.getloadavg(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
