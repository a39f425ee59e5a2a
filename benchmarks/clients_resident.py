"""What a command costs through optcc's resident server, against optcc in-process and bare clang.

    python benchmarks/clients_resident.py [--runs 30] [--server 127.0.0.1:29100] [--source FILE]

Times (wall, median of --runs, the three variants of a command run one after another in each round, so a
change in the machine's load reaches them alike) of:
  python -c pass                      this venv's empty interpreter (its site and .pth files)
  --version                           clang-19 / optcc in-process (OPTCC_RESIDENT=0) / optcc resident
  -E FILE                             a preprocessor run, as configure's probes are
  -Oz -c FILE                         a unit taken over, strategy stored, no object cache: with --server the
                                      service's answer is included; without it the service is known
                                      unreachable in this build (no call: optcc's own cost and clang's)
and, with --server, what a fresh gRPC channel and its first call (GetModelMetadata) cost in a process forked
from one that imported grpc (as the resident server's child makes its own), median of --runs.
The resident server runs in a folder of its own, started before the timings and stopped after them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def _time(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def compare(variants: dict[str, tuple[list[str], dict[str, str]]], runs: int, cwd: Path) -> dict[str, float]:
    """Median wall seconds of each variant, the variants interleaved run by run (one warm-up round)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(runs + 1):
        for name, (command, env) in variants.items():
            seconds = _time(command, env, cwd)
            if round_:
                times[name].append(seconds)
    return {name: statistics.median(values) for name, values in times.items()}


def channel_cost(server: str, runs: int) -> float:
    """Median seconds of a new channel's first GetModelMetadata in a child forked from this process."""
    import grpc

    from optserve.v1 import optserve_pb2 as pb

    times = []
    for _ in range(runs):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            started = time.perf_counter()
            with grpc.insecure_channel(server) as channel:
                call = channel.unary_unary(
                    "/optserve.v1.PassOrdering/GetModelMetadata",
                    request_serializer=pb.ModelMetadataRequest.SerializeToString,
                    response_deserializer=pb.ModelMetadata.FromString,
                )
                call(pb.ModelMetadataRequest(), timeout=10)
            os.write(write, repr(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(write)
        times.append(float(os.read(read, 100)))
        os.close(read)
        os.waitpid(pid, 0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--server", help="host:port of a running service (the -c unit is then answered)")
    parser.add_argument("--source", type=Path, default=ROOT / "tests/data/clients/wordstat/checksum.c")
    args = parser.parse_args()
    load_before = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="optcc-bench-", dir="/tmp"))
    scratch = Path(tempfile.mkdtemp(prefix="optcc-bench-work-"))
    source = args.source.resolve()
    base = os.environ | {"TMPDIR": str(scratch), "OPTCC_RESIDENT_DIR": str(folder), "OPTCC_CACHE": "0"}
    base |= {"OPTCC_STRATEGY": "stored"}
    if args.server:
        base |= {"OPTCC_SERVER": args.server}
    else:  # known unreachable in this build (its TMPDIR's state): no call, as for a build's later units
        base |= {"OPTCC_SERVER": "127.0.0.1:1", "OPTCC_RETRY": "3600"}
    local, resident = base | {"OPTCC_RESIDENT": "0"}, base | {"OPTCC_RESIDENT": "1"}
    optcc = str(BIN / "optcc")
    flags = ["-I", str(source.parent)]
    commands = {
        "--version": ["--version"],
        f"-E {source.name}": [*flags, "-E", str(source), "-o", "out.i"],
        f"-Oz -c {source.name}": ["-Oz", *flags, "-c", str(source), "-o", "out.o"],
    }
    rows = []
    try:
        subprocess.run([optcc, "--start-server"], env=resident, check=True, capture_output=True)
        subprocess.run(
            [optcc, *commands[f"-Oz -c {source.name}"]], env=local, cwd=scratch, capture_output=True
        )
        interpreter = compare({"python": ([sys.executable, "-c", "pass"], base)}, args.runs, scratch)
        rows.append(("python -c pass", None, None, interpreter["python"]))
        for name, command in commands.items():
            medians = compare(
                {
                    "clang": (["clang-19", *command], base),
                    "in-process": ([optcc, *command], local),
                    "resident": ([optcc, *command], resident),
                },
                args.runs,
                scratch,
            )
            rows.append((name, medians["clang"], medians["in-process"], medians["resident"]))
        channel = channel_cost(args.server, args.runs) if args.server else None
    finally:
        subprocess.run([optcc, "--stop-server"], env=resident, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()
    service = f"service {args.server}" if args.server else "service known unreachable (no call)"
    print(f"{args.runs} runs each, medians; {service}; strategy stored, no object cache")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, after {load_after[0]:.2f}\n")
    print("| command | clang-19 (ms) | optcc in-process (ms) | optcc resident (ms) | in-process / clang "
          "| resident / clang | resident saves |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, clang, in_process, served in rows:
        if clang is None:
            print(f"| {name} | | | {served * 1000:.0f} | | | |")
            continue
        print(
            f"| {name} | {clang * 1000:.0f} | {in_process * 1000:.0f} | {served * 1000:.0f} "
            f"| {in_process / clang:.2f}x | {served / clang:.2f}x | {(in_process - served) * 1000:.0f} ms |"
        )
    if channel is not None:
        print(f"\na new gRPC channel and its first call in a forked child: {channel * 1000:.1f} ms (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
