"""The service's time for a first build's units, strategy stored: read (parse to text IR in a compiler worker,
hash, look up, record as text) against unread (record the bitcode as it came, `optserve tune` reads it).

    python benchmarks/tuning_unread.py --tree data/clients/builds/mxml/clang \
        --flags "-g -Os -D_GNU_SOURCE -Oz -D_THREAD_SAFE -D_REENTRANT -D_FORTIFY_SOURCE=2 -I." [--runs 5]

Each .c of --tree is compiled as optcc compiles it for the service (--flags, then `-Xclang
-disable-llvm-passes -emit-llvm -c`: bitcode). For each run and each side, a fresh empty SQLite store and a
fresh Optimizer (Ray-free: the real compiler pool, the real store; warmed up before the clock starts,
as a running service is: `Optimizer.warm`), then every unit once, one request at a time, as
optcc asks (strategy stored, client_compares, skip_input_cost, return_object, its source path as
unit_name). Per unit: the median over --runs of the Optimizer's wall time and of the answer's
`timings.total_s` (what the service reports as service_total_s). "read" is today's path with the unread
step switched off (`Optimizer._unread` answering None), "unread" the path as shipped.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from optserve.compiler.cache import ResultCache
from optserve.compiler.workers import CompilerPool
from optserve.config import Settings
from optserve.serve import schemas
from optserve.serve.optimize.optimizer import Optimizer
from optserve.tuning.store import open_store


def bitcode_of(tree: Path, source: Path, flags: list[str], out: Path) -> bytes:
    command = ["clang-19", *flags, "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-w"]
    subprocess.run([*command, source.name, "-o", str(out)], cwd=tree, check=True)
    return out.read_bytes()


class _NoMetadata:
    async def __call__(self) -> schemas.ModelMetadata:
        return schemas.ModelMetadata(
            name="none", version="0", backend="none", platform="cpu", ready=True, strategies=["stored"],
            max_samples=1, max_feedback_rounds=0, max_ir_bytes=4 * 2**20,
        )  # fmt: skip


async def one_side(units: dict[str, bytes], pool: CompilerPool, read: bool, folder: Path) -> dict:
    settings = Settings()
    with open_store(str(folder / f"{'read' if read else 'unread'}.sqlite3")) as store:
        optimizer = Optimizer(settings, None, pool, ResultCache(1), _NoMetadata(), store)
        if read:

            async def no_unread(*args):
                return None

            optimizer._unread = no_unread
        await optimizer.warm(60)  # as a service is before it says it is ready
        times = {}
        for name, bitcode in units.items():
            request = schemas.OptimizeRequest(
                ir_bitcode=base64.b64encode(bitcode), objective="text_size", strategy="stored",
                return_object=True, skip_input_cost=True, client_compares=True, unit_name=name,
            )  # fmt: skip
            started = time.perf_counter()
            response = await optimizer.optimize(request)
            wall = time.perf_counter() - started
            assert response.best.source == "client_baseline" and response.tuning.recorded, name
            times[name] = (wall, response.timings.total_s)
        stats = store.stats()
        times["(store)"] = (stats.recorded_units, stats.pending_raw_units)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--flags", default="-Oz")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    flags = shlex.split(args.flags)
    with tempfile.TemporaryDirectory(prefix="tuning-unread-") as scratch:
        folder = Path(scratch)
        units = {
            source.name: bitcode_of(args.tree, source, flags, folder / (source.stem + ".bc"))
            for source in sorted(args.tree.resolve().glob("*.c"))
        }
        runs: dict[str, list[dict]] = {"read": [], "unread": []}
        with CompilerPool(processes=2, timeout_s=60) as pool:
            for run in range(args.runs):
                for side in ("read", "unread"):
                    side_folder = folder / f"{side}{run}"
                    side_folder.mkdir()
                    runs[side].append(asyncio.run(one_side(units, pool, side == "read", side_folder)))
    result = {"units": {}, "totals": {}, "store": {}}
    for side, side_runs in runs.items():
        recorded, pending = side_runs[0]["(store)"]
        result["store"][side] = {"recorded_units": recorded, "pending_raw_units": pending}
        total_wall = total_service = 0.0
        for name, bitcode in units.items():
            wall = statistics.median(r[name][0] for r in side_runs)
            service = statistics.median(r[name][1] for r in side_runs)
            entry = result["units"].setdefault(name, {"bitcode_bytes": len(bitcode)})
            entry[side] = {"wall_ms": round(1000 * wall, 1), "service_total_ms": round(1000 * service, 1)}
            total_wall, total_service = total_wall + wall, total_service + service
        result["totals"][side] = {"wall_ms": round(1000 * total_wall, 1), "service_total_ms":
                                  round(1000 * total_service, 1)}  # fmt: skip
    print(f"{'unit':<20}{'bitcode':>10}{'read ms':>10}{'unread ms':>11}")
    for name, entry in result["units"].items():
        read, unread = entry["read"]["wall_ms"], entry["unread"]["wall_ms"]
        print(f"{name:<20}{entry['bitcode_bytes']:>10}{read:>10}{unread:>11}")
    read, unread = result["totals"]["read"]["wall_ms"], result["totals"]["unread"]["wall_ms"]
    print(f"{'total':<30}{read:>10}{unread:>11}")
    print(json.dumps(result["store"]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
