"""How `optserve tune` scales with its workers: the same recorded units tuned with 1 and 2 Ray workers.

    python benchmarks/tuning_workers.py [--budget 100] [--order 1,2,1,2] [SOURCE.c ...]

Each C source (default: the test units, tests/data/c and tests/data/units) is compiled by clang-19 as optcc's
IR step does (-Oz before LLVM's passes), printed by LLVM (parse_ir) and recorded in a fresh SQLite store as
the service records a unit. Every run then tunes a copy of that store with `optserve tune --workers N --json`,
in the order given (alternating, so a change in the machine's load touches both counts). Prints one line per
run (compiles, wall and Ray-start seconds, compiles/s after the start, compiles per compile-CPU second, bytes
saved, the 1-minute load average before and after) and the median compiles/s per count with the speed-up.
The bytes saved must be equal across runs (the search is deterministic); the script exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from optserve.compiler.ir import parse_ir
from optserve.tuning.store import open_store
from optserve.tuning.unit_keys import unit_hash

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCES = sorted((ROOT / "tests/data/c").glob("*.c")) + sorted(
    (ROOT / "tests/data/units").glob("*.c")
)
OPTSERVE = Path(sys.executable).with_name("optserve")


def unit_ir(source: Path, clang: str) -> str:
    """The unit's IR as the service records it from optcc: clang's IR at -Oz before LLVM's passes (optcc's
    default IR step, OPTCC_IR=oz), printed by LLVM."""
    flags = ("-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-o", "-")
    text = subprocess.run([clang, *flags, str(source)], check=True, capture_output=True, text=True).stdout
    return parse_ir(text, max_bytes=64 << 20)


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def tune(store: Path, workers: int, budget: int) -> dict:
    command = [
        str(OPTSERVE),
        "tune",
        "--store",
        str(store),
        "--budget",
        str(budget),
        "--workers",
        str(workers),
    ]
    before = load_average()
    done = subprocess.run([*command, "--json"], check=True, capture_output=True, text=True)
    summary = json.loads(done.stdout)
    summary["load_before"], summary["load_after"] = before, load_average()
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", type=Path, default=DEFAULT_SOURCES)
    parser.add_argument("--budget", type=int, default=100, help="compiles per function (default 100)")
    parser.add_argument("--order", default="1,2,1,2", help="worker counts, one run each, in this order")
    parser.add_argument("--clang", default="clang-19")
    args = parser.parse_args()
    order = [int(w) for w in args.order.split(",")]
    with tempfile.TemporaryDirectory(prefix="tuning-workers-") as scratch:
        base = Path(scratch) / "base.sqlite3"
        with open_store(str(base)) as store:
            for source in args.sources:
                ir = unit_ir(source, args.clang)
                store.record_unit(unit_hash(ir), ir, source.name)
        print(f"{len(args.sources)} units recorded; budget {args.budget}; runs {order}", flush=True)
        rates: dict[int, list[float]] = {}
        saved = set()
        for run, workers in enumerate(order):
            copy = Path(scratch) / f"run{run}.sqlite3"
            shutil.copy(base, copy)
            r = tune(copy, workers, args.budget)
            rates.setdefault(workers, []).append(r["compiles_per_s"])
            saved.add((r["saved_by_units"], r["oz_cost_of_units"]))
            print(
                f"workers {workers}: {r['compiles']} compiles in {r['seconds']:.1f} s (Ray's start "
                f"{r['startup_seconds']:.1f} s), {r['compiles_per_s']} compiles/s, "
                f"{r.get('compiles_per_cpu_s', '-')} per compile-CPU s, saved {r['saved_by_units']} of "
                f"{r['oz_cost_of_units']} B, load {r['load_before']:.2f} -> {r['load_after']:.2f}",
                flush=True,
            )
    medians = {w: statistics.median(v) for w, v in sorted(rates.items())}
    print("median compiles/s: " + ", ".join(f"{w} workers {m:.1f}" for w, m in medians.items()))
    if 1 in medians:
        for w, m in medians.items():
            if w != 1:
                print(f"speed-up {w} vs 1 workers: {m / medians[1]:.2f}x")
    if len(saved) != 1:
        print(f"bytes saved differ between runs: {sorted(saved)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
