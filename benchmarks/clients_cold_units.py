"""Where a cold optcc unit's time goes: captured units of real packages compiled one at a time by clang-19 -Oz
and by one or more optcc installs, wall and CPU time each, with optcc's own per-unit log summed.

    python benchmarks/clients_cold_units.py --server 127.0.0.1:18321 --packages xz-utils mxml \
        --optcc .venv/bin/optcc [--optcc /work/main/.venv/bin/optcc] [--capture DIR] [--units N]

Units: the real-code corpus's captures (`data/real/capture/<package>/captured.jsonl`: each unit's source,
directory and flags, as the package's own build compiled it; configure's probes left out), one per source.
Every unit is compiled by each side in turn (clang, then each optcc), so the load moves all sides alike.
optcc runs with its object cache off (every unit cold) and its log on; `CPU` is user + system time of the
compile's processes (optcc, clang under it), not the service's. The service should be fresh (its result
cache empty) for the first optcc side; later sides find the model's prompts in vLLM's prefix cache.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from optserve.config import REPO_ROOT

# optcc's per-unit log fields summed (seconds), in the order a unit spends them.
FIELDS = ("before_s", "ir_step_s", "clang_s", "deadline_s", "service_s", "service_total_s", "seconds")


def units(capture: Path, packages: list[str], limit: int | None) -> list[dict]:
    """One captured compile per source of each package (configure's conftest probes left out)."""
    found, seen = [], set()
    for package in packages:
        for line in (capture / package / "captured.jsonl").read_text().splitlines():
            unit = json.loads(line)
            if "conftest" in unit["source"] or unit["source"] in seen or not Path(unit["source"]).exists():
                continue
            seen.add(unit["source"])
            found.append(unit | {"package": package})
    return found[:limit]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compile_once(compiler: str, unit: dict, output: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one `compiler -Oz FLAGS -c SOURCE -o output`."""
    cpu, started = children_cpu_s(), time.monotonic()
    done = subprocess.run(
        [compiler, "-Oz", *unit["ir_flags"], "-c", unit["source"], "-o", str(output)],
        cwd=unit["cwd"], env=env, capture_output=True,
    )  # fmt: skip
    return time.monotonic() - started, children_cpu_s() - cpu, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", required=True)
    parser.add_argument("--packages", nargs="+", default=["xz-utils", "mxml"])
    parser.add_argument("--optcc", action="append", required=True, help="an optcc to measure (repeatable)")
    parser.add_argument("--capture", type=Path, default=REPO_ROOT / "data" / "real" / "capture")
    parser.add_argument("--units", type=int, help="at most this many units (default: all)")
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "runs" / "clients" / "cold-units")
    args = parser.parse_args()
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    chosen = units(args.capture, args.packages, args.units)
    optccs = {f"optcc {i + 1}": os.path.abspath(path) for i, path in enumerate(args.optcc)}
    sides = {"clang-19": "clang-19", **optccs}
    logs = {side: args.work / f"optcc-{i}.jsonl" for i, side in enumerate(sides)}
    for log in logs.values():
        log.unlink(missing_ok=True)
    totals = {side: Counter() for side in sides}
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for unit in chosen:
        for side, compiler in sides.items():
            env = os.environ | {"OPTCC_SERVER": args.server, "OPTCC_CACHE": "0", "OPTCC_LOG": str(logs[side])}
            wall, cpu, status = compile_once(compiler, unit, args.work / "unit.o", env)
            if status != 0:
                print(f"{side} failed on {unit['source']}", file=sys.stderr)
            totals[side].update(wall=wall, cpu=cpu)
    print(
        f"{started}, {len(chosen)} units of {', '.join(args.packages)}, {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; server {args.server}"
    )
    header = "| side | wall (s) | CPU (s) | wall / clang | CPU / clang | outcomes | " + " | ".join(FIELDS)
    print(f"\n{header} |")
    print("|---|---:|---:|---:|---:|---|" + "---:|" * len(FIELDS))
    clang = totals["clang-19"]
    for side, compiler in sides.items():
        text = logs[side].read_text() if logs[side].exists() else ""
        records = [json.loads(line) for line in text.splitlines()]
        outcomes = Counter(r["outcome"] for r in records)
        sums = [f"{sum(r.get(f) or 0.0 for r in records):.1f}" if records else "–" for f in FIELDS]
        t = totals[side]
        name = side if side == "clang-19" else f"{side} ({compiler})"
        print(
            f"| {name} | {t['wall']:.1f} | {t['cpu']:.1f} | {t['wall'] / clang['wall']:.2f} "
            f"| {t['cpu'] / clang['cpu']:.2f} | {dict(outcomes) or '–'} | " + " | ".join(sums) + " |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
