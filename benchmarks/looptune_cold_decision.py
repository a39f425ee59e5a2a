"""What a decision in a fresh process is worth: `optserve schedule-local` as a new user runs it (one process
per shape; a LoopTune replica's first Schedule was the same case), with the method's loading done before its
time budget (policies/search.py `prepare`, the code as it is) and inside it (`prepare` patched out in the
child: how every fresh process decided before). Each child prints its decision; the parent then compiles
both schedules and times them interleaved against numpy, so both sides are timed alike on one machine.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_cold_decision.py --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# the child: what `optserve schedule-local` runs (its entry, schedule_contraction, with the default settings:
# no Ray or CLI needed, so it runs on the lent host too), optionally with the loading back inside the budget
CHILD = """
import json, sys
if sys.argv[1] == "inside":
    import optserve.policies.scheduler as scheduler
    scheduler.prepare = lambda method: None
from optserve.config import LoopTuneSettings
from optserve.kernels.spec import parse_sizes
from optserve.policies.scheduler import schedule_contraction
einsum, sizes, threads = sys.argv[2], parse_sizes(sys.argv[3]), int(sys.argv[4])
result = schedule_contraction(einsum, sizes, LoopTuneSettings(), threads=threads)
print(json.dumps(result.to_dict()))
"""


def decide(case, threads: int, mode: str) -> dict:
    sizes = ",".join(f"{k}={v}" for k, v in case.sizes)
    command = [sys.executable, "-c", CHILD, mode, case.einsum, sizes, str(threads)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300)
    result = json.loads(done.stdout)
    result["process_s"] = time.perf_counter() - start
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--cases", nargs="*", default=None, help="case names (default: the held-out suite)")
    args = parser.parse_args(argv)
    import numpy as np
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.kernels.measure import best_call_seconds, measure
    from optserve.kernels.parallel import compile_parallel
    from optserve.kernels.reference import numpy_program
    from optserve.kernels.schedule import Schedule
    from optserve.looptune_training.suites import HELD_OUT, case_from_name

    cases = [case_from_name(name) for name in args.cases] if args.cases else list(HELD_OUT)
    print(f"# cold decisions, {args.threads} thread(s), load {os.getloadavg()[0]:.1f}", flush=True)
    ratios = {"prepared": [], "inside": []}
    for case in cases:
        decided = {mode: decide(case, args.threads, mode) for mode in ("prepared", "inside")}
        spec = case.spec()
        kernels = {
            mode: compile_parallel(spec, Schedule.from_text(d["schedule"]), args.threads)
            for mode, d in decided.items()
        }
        _, program = numpy_program(spec)
        rng = np.random.default_rng(0)
        lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.inputs)

        def reference(program=program, lhs=lhs, rhs=rhs):
            return program(lhs, rhs)

        best = dict.fromkeys([*kernels, "numpy"], 0.0)
        try:
            for _ in range(args.rounds):
                for mode, kernel in kernels.items():
                    best[mode] = max(best[mode], measure(kernel, runs=5, warmup_calls=2).gflops)
                seconds = best_call_seconds(reference, 5)
                best["numpy"] = max(best["numpy"], spec.flops / seconds / 1e9)
        finally:
            for kernel in kernels.values():
                kernel.close()
        for mode in kernels:
            ratios[mode].append(best[mode] / best["numpy"])
        sides = [
            f"{mode} {best[mode]:.1f} GFLOPS ({d['evaluations']} timed, {d['search_seconds']:.2f} s,"
            f" {' '.join(d['actions']) or '(base)'})"
            for mode, d in decided.items()
        ]
        print(f"{case.name}: {', '.join(sides)}, numpy {best['numpy']:.1f}", flush=True)
    for mode, values in ratios.items():
        print(
            f"geomean vs numpy, loading {mode}: {statistics.geometric_mean(values):.3f}"
            f" (worst {min(values):.2f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
