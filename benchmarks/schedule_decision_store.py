"""A repeated Schedule after the service restarts: answered from the tuning store's decisions, against the
first answer, which searched (policies/decision_cache.py LayeredDecisionCache over the store).

    python benchmarks/schedule_decision_store.py [--rounds 3] [--http-port 28620 --grpc-port 29620]

Each round starts `optserve serve` (the bundled models) on a fresh, empty SQLite tuning store
(OPTSERVE_TUNING_DIR: a new temporary folder), asks Schedule once for each shape (decided: searched), once
more (the replica's memory), stops the service, starts it again on the same store, and asks again (a new
replica: its memory empty, the store's decisions). Each call is timed at the client, one at a time, gRPC
round trip included. Prints one JSON line per call, then the per-shape range over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from optserve.clients.python.client import OptserveClient
from optserve.testing.polling import poll

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
# (sizes, threads, method: "" for the service's default decision)
SHAPES = [
    ({"m": 256, "k": 256, "n": 256}, 1, ""),
    ({"m": 512, "k": 128, "n": 384}, 2, ""),
    ({"m": 96, "k": 200, "n": 160}, 1, ""),
    ({"m": 128, "k": 96, "n": 64}, 1, "greedy1"),
]
PHASES = ("first", "memory", "after_restart")


def start_service(store_dir: Path, http_port: int, grpc_port: int, log: Path) -> subprocess.Popen:
    """`optserve serve` in a process group of its own, on the store in `store_dir`, ready for Schedule."""
    optserve = Path(sys.executable).parent / "optserve"
    env = {**os.environ, "OPTSERVE_TUNING_DIR": str(store_dir)}
    command = [str(optserve), "serve", "--http-port", str(http_port), "--grpc-port", str(grpc_port)]
    with log.open("a") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )

    def serving() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"optserve serve exited ({process.returncode}); see {log}")
        try:
            with OptserveClient(f"127.0.0.1:{grpc_port}", timeout_s=5.0, retry=None) as client:
                return client.health("optserve.v1.LoopTune") == "SERVING"
        except Exception:
            return False

    poll(serving, 600.0, "the service to serve LoopTune", every_s=2.0)
    return process


def stop_service(process: subprocess.Popen) -> None:
    """Stop the service's process group (SIGINT, as Ctrl-C: Ray and Serve shut down), killed after 60 s."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def ask_all(grpc_port: int, round_: int, phase: str) -> list[dict]:
    rows = []
    with OptserveClient(f"127.0.0.1:{grpc_port}", timeout_s=300.0) as client:
        for sizes, threads, method in SHAPES:
            started = time.perf_counter()
            answer = client.schedule(
                MATMUL, sizes, method=method, threads=threads, time_limit_s=10.0 if method else 0.0
            )
            call_s = time.perf_counter() - started
            row = {
                "round": round_,
                "phase": phase,
                "shape": "x".join(str(sizes[i]) for i in "mkn") + f" t{threads} {answer.method}",
                "cached": answer.cached,
                "evaluations": answer.evaluations,
                "call_s": round(call_s, 4),
                "load": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--http-port", type=int, default=28620)
    parser.add_argument("--grpc-port", type=int, default=29620)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="decision-store-") as folder:
        log = Path(folder) / "service.log"
        for round_ in range(1, args.rounds + 1):
            store_dir = Path(folder) / f"store{round_}"
            store_dir.mkdir()
            service = start_service(store_dir, args.http_port, args.grpc_port, log)
            try:
                rows += ask_all(args.grpc_port, round_, "first")
                rows += ask_all(args.grpc_port, round_, "memory")
            finally:
                stop_service(service)
            service = start_service(store_dir, args.http_port, args.grpc_port, log)
            try:
                rows += ask_all(args.grpc_port, round_, "after_restart")
            finally:
                stop_service(service)
    print(f"\n{'shape':<28}" + "".join(f"{phase + ' (s)':>22}" for phase in PHASES))
    for shape in dict.fromkeys(row["shape"].rsplit(" ", 1)[0] for row in rows):
        cells = []
        for phase in PHASES:
            times = [r["call_s"] for r in rows if r["phase"] == phase and r["shape"].startswith(shape + " ")]
            cells.append(f"{min(times):.3f}-{max(times):.3f}")
        print(f"{shape:<28}" + "".join(f"{cell:>22}" for cell in cells))
    answered = [r["cached"] for r in rows if r["phase"] != "first"]
    print(f"\nrepeated calls answered cached: {sum(answered)} of {len(answered)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
