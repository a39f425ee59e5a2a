"""JIT compile time of loop nests: IR generation, parsing and machine-code generation, per schedule.

For each sampled matmul of the test split, the base schedule and a register-tiled schedule (m/4, n/16, k,
m 4, n 16) are compiled `--repeats` times in this process; the median of each phase is reported.

    python benchmarks/kernels_compile.py --shapes 24 --out docs/bench/kernels_compile.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import llvmlite.binding as llvm

from optserve.kernels.codegen import generate_ir
from optserve.kernels.jit import host_description, host_target, new_target_machine
from optserve.kernels.schedule import Schedule, split_loop


def tiled(schedule: Schedule) -> Schedule:
    """m, k, n -> m/4, n/16, k, m 4, n 16 (sizes are multiples of 16 in the matmul set)."""
    m_outer, m_inner, k, n_outer, n_inner = (
        *split_loop(schedule.compute[:1], 0, 4),
        schedule.compute[1],
        *split_loop(schedule.compute[2:], 0, 16),
    )
    return Schedule((m_outer, n_outer, k, m_inner, n_inner), schedule.writeback)


def phases(spec, schedule) -> tuple[float, float, float]:
    start = time.perf_counter()
    text = generate_ir(spec, schedule, host_target())
    generated = time.perf_counter()
    module = llvm.parse_assembly(text)
    module.verify()
    parsed = time.perf_counter()
    engine = llvm.create_mcjit_compiler(module, new_target_machine())
    engine.finalize_object()
    engine.get_function_address("kernel")
    done = time.perf_counter()
    engine.close()
    return generated - start, parsed - generated, done - parsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="docs/bench/kernels_compile.md")
    args = parser.parse_args()
    from optserve.looptune_training.evaluate import search_sample

    rows = {"base": [], "tiled": []}
    for bench in search_sample("test", args.shapes):  # the shapes benchmarks/kernels_bench.py times
        spec = bench.spec()
        base = Schedule.base(spec)
        for name, schedule in (("base", base), ("tiled", tiled(base))):
            runs = [phases(spec, schedule) for _ in range(args.repeats)]
            rows[name].append([statistics.median(r[i] for r in runs) * 1e3 for i in range(3)])
    lines = [
        "### JIT compile time (single process)",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; target {host_description()}",
        f"- Command: `python {' '.join(sys.argv)}`; median of {args.repeats} compiles per schedule,"
        f" mean over {args.shapes} shapes",
        "",
        "| schedule | IR generation ms | parse + verify ms | machine code ms | total ms |",
        "|---|---|---|---|---|",
    ]
    for name, values in rows.items():
        means = [statistics.mean(v[i] for v in values) for i in range(3)]
        lines.append(f"| {name} | {means[0]:.2f} | {means[1]:.2f} | {means[2]:.2f} | {sum(means):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
