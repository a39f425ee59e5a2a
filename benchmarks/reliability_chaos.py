"""Chaos soak (issue 38): steady Optimize load on the real service while a compiler worker or the engine
replica is SIGKILLed at random times; error rate, latency percentiles and the time to recover from each kill.

Starts its own service (local Ray, the serve tests' tiny stand-in model and small limits; ports 28300/29300
unless given), then `--users` threads each send one Optimize after another (greedy, cache bypassed, one try,
deadline 20 s; the add/sum/unrolled-loop test modules in turn) for `--minutes`. A chaos thread kills, every
`--every-s` on average (exponential gaps, seeded), a random victim: a compiler worker process (a child of a
CompilerWorkers replica: the pool replaces it) or the PassOrderingEngine replica (Serve replaces it). A
kill's recovery time: from the kill until a call sent after it is answered OK.

    nice -n 10 python benchmarks/reliability_chaos.py --minutes 5 --users 3   # -> docs/bench/reliability.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reliability_common import REPO, machine, utc_now, write_section  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.serve.serve_helpers import TOKEN, build_tiny_model, replica_pids, service_settings  # noqa: E402

OUT = REPO / "runs" / "reliability_chaos"
MODULES = [
    (REPO / "tests" / "data" / "serve" / name).read_text()
    for name in ("add.ll", "sum.ll", "unrolled_loop.ll")
]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _victim(rng: random.Random) -> tuple[str, int] | None:
    """("compiler worker" | "engine replica", pid) of a live process to kill, or None."""
    if rng.random() < 0.5:
        workers = [
            child.pid
            for pid in replica_pids("CompilerWorkers")
            for child in psutil.Process(pid).children()
            if child.is_running()
        ]
        if workers:
            return "compiler worker", rng.choice(workers)
    engines = replica_pids("PassOrderingEngine")
    return ("engine replica", engines[0]) if engines else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--every-s", type=float, default=45.0, help="mean seconds between kills")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--http-port", type=int, default=int(os.environ.get("CHAOS_HTTP_PORT", "28300")))
    parser.add_argument("--grpc-port", type=int, default=int(os.environ.get("CHAOS_GRPC_PORT", "29300")))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from optserve.clients.python.client import CallError, OptserveClient
    from optserve.serve import server
    from optserve.serve.app import APP_NAME

    OUT.mkdir(parents=True, exist_ok=True)
    settings = service_settings(
        build_tiny_model(OUT / "tiny-model"), http_port=args.http_port, grpc_port=args.grpc_port
    )
    started = time.monotonic()
    endpoints = server.start(settings)
    print(f"service up in {time.monotonic() - started:.0f} s", flush=True)
    calls: list[tuple[float, float, str]] = []  # (sent, seconds, code), sent since the load's start
    kills: list[tuple[float, str, int]] = []
    stop = threading.Event()
    t0 = time.monotonic()

    def load(user: int) -> None:
        with OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=None) as client:
            turn = user
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    client.optimize(MODULES[turn % len(MODULES)], bypass_cache=True, deadline_s=20)
                    code = "OK"
                except CallError as err:
                    code = err.code.name
                calls.append((sent - t0, time.monotonic() - sent, code))
                turn += 1

    def chaos() -> None:
        rng = random.Random(args.seed)
        while not stop.wait(min(rng.expovariate(1 / args.every_s), 90)):
            victim = _victim(rng)
            if victim is None:
                continue
            try:
                os.kill(victim[1], signal.SIGKILL)
            except ProcessLookupError:
                continue
            kills.append((time.monotonic() - t0, *victim))
            print(f"{time.monotonic() - t0:6.1f} s: killed {victim[0]} {victim[1]}", flush=True)

    threads = [threading.Thread(target=load, args=(u,), daemon=True) for u in range(args.users)]
    threads.append(threading.Thread(target=chaos, daemon=True))
    for thread in threads:
        thread.start()
    stop.wait(args.minutes * 60)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    server.stop()
    report(args, calls, kills)


def report(args, calls: list[tuple[float, float, str]], kills: list[tuple[float, str, int]]) -> None:
    codes = Counter(code for _, _, code in calls)
    ok = [seconds for _, seconds, code in calls if code == "OK"]
    errors = len(calls) - len(ok)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "calls.json").write_text(json.dumps({"calls": calls, "kills": kills}) + "\n")
    rows = []
    for number, (at, what, pid) in enumerate(kills):
        until = kills[number + 1][0] if number + 1 < len(kills) else float("inf")
        answered = [sent + seconds for sent, seconds, code in calls if code == "OK" and sent >= at]
        lost = Counter(code for sent, seconds, code in calls if code != "OK" and at <= sent + seconds < until)
        recovery = f"{min(answered) - at:.1f}" if answered else "not within the run"
        rows.append(f"| {at:.0f} | {what} (pid {pid}) | {recovery} | {dict(lost) or '-'} |")
    summary = (
        f"{len(calls)} calls, {errors} not OK ({100 * errors / max(len(calls), 1):.1f} %): {dict(codes)}; "
        f"OK latency p50 / p95 / p99 {_percentile(ok, 0.5):.2f} / {_percentile(ok, 0.95):.2f} / "
        f"{_percentile(ok, 0.99):.2f} s; {len(kills)} kills"
    )
    print(summary, *rows, sep="\n")
    if args.no_write:
        return
    write_section(
        "chaos",
        f"""## Chaos soak: workers and the engine killed under load (issue 38)

- date: {utc_now()}; machine: {machine()} (shared with other jobs; `nice -n 10`)
- command: `nice -n 10 python benchmarks/reliability_chaos.py --minutes {args.minutes:g} \
--users {args.users} --every-s {args.every_s:g} --seed {args.seed}`
- service: local Ray, tiny stand-in model (torch, CPU), 2 compiler workers; load: {args.users} gRPC threads,
  one Optimize after another (greedy, cache bypassed, one try, deadline 20 s) for {args.minutes:g} min;
  a SIGKILL every {args.every_s:g} s on average to a compiler worker or the PassOrderingEngine replica
- result: {summary}
- per kill: the answers not OK that ended after it and before the next kill; recovery: seconds from the
  kill until a call sent after it was answered OK (calls and kills: runs/reliability_chaos/calls.json)

| kill at (s) | victim | recovered after (s) | not OK after it |
|---|---|---|---|
{chr(10).join(rows) or "| - | none | - | - |"}
""",
    )


if __name__ == "__main__":
    main()
