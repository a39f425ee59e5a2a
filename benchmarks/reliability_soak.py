"""Overload soak: the real service at saturation under locust for a fixed time, with the memory of
every Ray process sampled throughout.

Starts its own service (local Ray, tiny stand-in model, the serve tests' small queue limits: 4 queued /
6 ongoing per deployment) on ports 48000/49000, runs loadtests/run_headless.py with more users than the
service admits, and reports requests, failures by kind, latency percentiles and RSS over time.

    nice -n 10 python benchmarks/reliability_soak.py --minutes 10 --users 16   # -> docs/bench/reliability.md
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

from optserve.testing.reliability_report import REPO, machine, utc_now, write_section
from optserve.testing.service import MAX_ONGOING, MAX_QUEUED, TOKEN, build_tiny_model, service_settings

OUT = REPO / "runs" / "reliability_soak"
HTTP_PORT, GRPC_PORT = 48000, 49000


class MemorySampler(threading.Thread):
    """Every `period_s`: total RSS of this process's descendants (Ray's processes; the load generator's
    process tree excluded) — the service's memory over time."""

    def __init__(self, period_s: float, exclude: set[int]):
        super().__init__(daemon=True)
        self.period_s, self.exclude = period_s, exclude
        self.samples: list[tuple[float, float, int]] = []  # (seconds since start, MiB, processes)
        self.stop_event = threading.Event()
        self.started = time.monotonic()

    def sample(self) -> None:
        me = psutil.Process()
        total, count = 0, 0
        for process in me.children(recursive=True):
            try:
                if process.pid in self.exclude or any(p.pid in self.exclude for p in process.parents()):
                    continue
                total += process.memory_info().rss
                count += 1
            except psutil.Error:
                continue
        self.samples.append((time.monotonic() - self.started, total / 2**20, count))

    def run(self) -> None:
        while not self.stop_event.wait(self.period_s):
            self.sample()


def failures_by_kind(path: Path) -> Counter:
    kinds: Counter = Counter()
    if not path.exists():
        return kinds
    for row in csv.DictReader(path.open()):
        error = row["Error"]
        kind = error.split(":", 1)[0].replace("RuntimeError(", "").strip("'\" (")
        kinds[kind] += int(row["Occurrences"])
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--users", type=int, default=16, help="more than the service admits (saturation)")
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from optserve.serve import server

    OUT.mkdir(parents=True, exist_ok=True)
    model_dir = build_tiny_model(OUT / "tiny-model")
    settings = service_settings(model_dir, http_port=HTTP_PORT, grpc_port=GRPC_PORT)
    started = time.monotonic()
    endpoints = server.start(settings)
    print(f"service up in {time.monotonic() - started:.0f} s", flush=True)
    exclude: set[int] = set()
    sampler = MemorySampler(args.sample_s, exclude)
    sampler.sample()
    sampler.start()
    run_time = int(args.minutes * 60)
    command = [
        sys.executable, str(REPO / "loadtests" / "run_headless.py"), "--protocol", args.protocol,
        "--users", str(args.users), "--run-time", str(run_time), "--deadline", "20",
        "--grpc-target", endpoints.grpc_target, "--http-url", endpoints.http_url, "--out", str(OUT),
    ]  # fmt: skip
    load = subprocess.Popen(
        command, env=os.environ | {"OPTSERVE_TOKEN": TOKEN}, stdout=subprocess.PIPE, text=True
    )
    exclude.add(load.pid)
    output, _ = load.communicate(timeout=run_time + 300)
    sampler.stop_event.set()
    sampler.join()
    sampler.sample()
    server.stop()

    scenario = next(OUT.glob(f"{args.protocol}-greedy1-u{args.users}"))
    summary = json.loads((scenario / "summary.json").read_text())
    kinds = failures_by_kind(scenario / "locust_failures.csv")
    print(output[-3000:])
    print("failures by kind:", dict(kinds))
    mem = sampler.samples
    print("RSS MiB over time:", [(round(t), round(m)) for t, m, _ in mem])
    if args.no_write:
        return
    first, peak, last = mem[0][1], max(m for _, m, _ in mem), mem[-1][1]
    under_load = [m for t, m, _ in mem if 30 <= t <= run_time]
    steps = max(1, len(mem) // 12)
    timeline = "\n".join(f"| {t:.0f} | {m:.0f} | {n} |" for t, m, n in mem[::steps])
    failure_rows = "\n".join(f"| {kind} | {count} |" for kind, count in kinds.most_common()) or "| none | 0 |"
    write_section(
        "soak",
        f"""## Overload soak at saturation (locust)

- date: {utc_now()}; machine: {machine()}
  (shared with other jobs while it ran: numbers are noisy)
- command:
  `nice -n 10 python benchmarks/reliability_soak.py --minutes {args.minutes:g} --users {args.users}`
- service: local Ray, tiny stand-in model (torch, CPU), 2 compiler workers,
  `max_queued_requests` {MAX_QUEUED}, `max_ongoing_requests` {MAX_ONGOING}
- load: {args.users} {args.protocol} users (4:1 Optimize greedy with deadline 20 s : Schedule 2 s),
  wait 0–0.5 s, cache bypassed, for {run_time} s
- requests: {summary["requests"]}, failed: {summary["failures"]}, throughput {summary["rps"]} req/s
- Optimize p50/p95/p99 (ms): {summary["optimize_ms"]}; Schedule p50/p95/p99 (ms): {summary["schedule_ms"]}

Failures by kind (status: count). RESOURCE_EXHAUSTED is the intended answer to overload (queues full):

| kind | count |
|---|---|
{failure_rows}

Memory (RSS of all Ray processes of the service, MiB): start {first:.0f}, peak {peak:.0f}, end {last:.0f};
under load min {min(under_load, default=0):.0f} / max {max(under_load, default=0):.0f}.

| seconds | RSS MiB | processes |
|---|---|---|
{timeline}
""",
    )


if __name__ == "__main__":
    main()
