"""Two concurrent real compiles through CompilerPool with one worker, without and with a burst process.

    nice -n 10 .venv/bin/python benchmarks/compiler_burst.py --rounds 10

The case of a tuned rebuild under `make -j2` on a 2-core machine (docs/tuning.md, "Where a build's time
goes"): two units ask for their object at once and the replica has one compile worker. Each round times a
pair of -Oz compiles with the object wanted (two of mxml's units, as the IR step of optcc makes them: clang-19
-g -Oz -Xclang -disable-llvm-passes -emit-llvm), submitted together, on a pool with `burst` 0 and one with 1,
alternating; and each compile alone. Prints each unit's time to its object (medians, ms) and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

from optserve.compiler.workers import CompilerPool

SOURCES = Path("data/clients/builds/mxml/clang")
UNITS = ("mxml-file.c", "mxml-index.c")


def unit_ir(name: str) -> str:
    command = ["clang-19", "-g", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-o", "-"]
    return subprocess.run(
        [*command, "-I", str(SOURCES), "-c", str(SOURCES / name)], check=True, capture_output=True, text=True
    ).stdout


def pair_ms(pool: CompilerPool, irs: list[str]) -> list[float]:
    """Each unit's wall time (ms) from the pair's start to its object, the units submitted in order."""
    started = time.monotonic()
    results: list = [None] * len(irs)
    finished = [0.0] * len(irs)

    def compile_unit(index: int) -> None:
        ir = f"{irs[index]}\n; {started}\n"  # new to every worker, as a build's next unit is
        results[index] = pool.evaluate(ir, [("-Oz",)], "text_size", want_object=True)[0]
        finished[index] = (time.monotonic() - started) * 1000

    threads = [threading.Thread(target=compile_unit, args=(i,)) for i in range(len(irs))]
    for thread in threads:
        thread.start()
        time.sleep(0.002)  # the first unit's request comes first
    for thread in threads:
        thread.join()
    assert all(r.ok for r in results), [r.error for r in results]
    return finished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    irs = [unit_ir(name) for name in UNITS]
    times: dict[str, list[float]] = {}
    with CompilerPool(1, 60.0) as serial, CompilerPool(1, 60.0, burst=1) as burst:
        for pool in (serial, burst):  # the burst process starts on the first overflow
            pair_ms(pool, irs)
            pair_ms(pool, irs)
        for _ in range(args.rounds):
            for name, pool in (("burst 0", serial), ("burst 1", burst)):
                for unit, ms in zip(UNITS, pair_ms(pool, irs), strict=True):
                    times.setdefault(f"{name}, {unit} (pair)", []).append(ms)
            for unit, ir in zip(UNITS, irs, strict=True):
                times.setdefault(f"alone, {unit}", []).append(pair_ms(serial, [ir])[0])
    for name, values in times.items():
        print(
            f"{name:32} median {statistics.median(values):6.0f} ms  min {min(values):6.0f} ms  "
            f"({len(values)} runs: {' '.join(f'{v:.0f}' for v in values)})"
        )
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
