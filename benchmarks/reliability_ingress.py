"""One or two ingress replicas: what the second costs (memory, idle CPU, the time `optserve serve`
takes to be ready) and what it buys (the outage clients see when one ingress replica is SIGKILLed).

For each count in `--replicas`, starts `optserve serve` as a user would (default settings, the bundled model;
`OPTSERVE_SERVE__INGRESS_REPLICAS` set; ports 28500/29500 unless given) and measures:
- ready: seconds from the command's start until `/v2/health/ready` answers 200 and every ingress replica
  runs;
- memory (RSS and USS) and CPU of each Ingress replica process while the service is idle for `--idle-s`;
- the kill: `--users` threads send Optimize one after another (greedy, add.ll, cache bypassed, deadline
  20 s) through clients that retry UNAVAILABLE and RESOURCE_EXHAUSTED until the call's deadline; after
  `--warm-s` one Ingress replica is SIGKILLed; the load goes on until `--after-s` past the kill. Counted:
  calls that failed (after their retries), by status; the recovery (from the kill until a call sent after
  it is answered OK); the longest a call took; the longest time without an OK answer around the kill.

    nice -n 10 python benchmarks/reliability_ingress.py   # -> docs/bench/reliability.md, section "ingress"
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil

from optserve.testing.polling import poll
from optserve.testing.reliability_report import REPO, machine, utc_now, write_section

OUT = REPO / "runs" / "reliability_ingress"
ADD_IR = (REPO / "tests" / "data" / "serve" / "add.ll").read_text()
INGRESS_TITLE = "ServeReplica:optserve:Ingress"
CALL_DEADLINE_S = 20.0
HEADER = (
    "| ingress replicas | ready (s) | RSS MiB | USS MiB | idle CPU % | calls | in flight at the kill | "
    "failed (after retries) | recovery (s) | no OK answer (s) | slowest call (s) |\n" + "|---" * 11 + "|"
)


def _titled(process: psutil.Process, title: str) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE and title in " ".join(process.cmdline())
    except psutil.Error:
        return False


def ingress_replicas(root: psutil.Process) -> list[psutil.Process]:
    """The Ingress replica processes below `root` (the `optserve serve` command: its Ray runs below it)."""
    try:
        below = root.children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in below if _titled(p, INGRESS_TITLE)]


def _ready(http_url: str) -> bool:
    try:
        return httpx.get(f"{http_url}/v2/health/ready", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _idle_costs(replicas: list[psutil.Process], idle_s: float) -> list[dict]:
    before = [(p, p.cpu_times()) for p in replicas]
    time.sleep(idle_s)  # the service idles: what each replica costs with no calls
    costs = []
    for process, times in before:
        now, memory = process.cpu_times(), process.memory_full_info()
        cpu_s = (now.user + now.system) - (times.user + times.system)
        costs.append(
            {
                "pid": process.pid,
                "rss_mib": memory.rss / 2**20,
                "uss_mib": memory.uss / 2**20,
                "idle_cpu_percent": 100 * cpu_s / idle_s,
            }  # fmt: skip
        )
    return costs


def _kill_one_under_load(args, root: psutil.Process, grpc_target: str) -> dict:
    from optserve.clients.python.client import CallError, OptserveClient, RetryPolicy
    from optserve.serve.app import APP_NAME

    # A client that retries UNAVAILABLE / RESOURCE_EXHAUSTED until the call's deadline (`optserve optimize`
    # retried by hand each second did the same for the 15.6 s).
    retrying = RetryPolicy(attempts=1000, initial_backoff_s=0.2, max_backoff_s=1.0)
    calls: list[tuple[float, float, str, str]] = []  # (sent, ended, code, message), from the load's start
    stop = threading.Event()
    t0 = time.monotonic()

    def load() -> None:
        with OptserveClient(grpc_target, application=APP_NAME, retry=retrying) as client:
            while not stop.is_set():
                sent = time.monotonic() - t0
                try:
                    client.optimize(ADD_IR, bypass_cache=True, deadline_s=CALL_DEADLINE_S)
                    code, message = "OK", ""
                except CallError as err:
                    code, message = err.code.name, err.message[:200]
                calls.append((sent, time.monotonic() - t0, code, message))

    threads = [threading.Thread(target=load, daemon=True) for _ in range(args.users)]
    for thread in threads:
        thread.start()
    time.sleep(args.warm_s)  # steady load before the kill
    (victim, *_) = ingress_replicas(root)
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic() - t0
    time.sleep(args.after_s)  # the load goes on past the kill
    stop.set()
    for thread in threads:
        thread.join(timeout=CALL_DEADLINE_S + 30)
    ok_ends = sorted(ended for _, ended, code, _ in calls if code == "OK")
    gaps = [later - earlier for earlier, later in zip(ok_ends, ok_ends[1:], strict=False) if later > killed]
    recovered = [ended for sent, ended, code, _ in calls if code == "OK" and sent >= killed]
    failed = [c for c in calls if c[2] != "OK"]
    return {
        "calls": len(calls),
        "failed": dict(Counter(code for _, _, code, _ in failed)),
        "failed_messages": sorted({message for *_, message in failed})[:5],
        "in_flight_at_kill": sum(1 for sent, ended, _, _ in calls if sent <= killed < ended),
        "recovery_s": (min(recovered) - killed) if recovered else None,
        "no_ok_answer_s": max(gaps, default=None),
        "slowest_call_s": max(ended - sent for sent, ended, _, _ in calls),
        "killed_at_s": killed,
        "call_log": calls,
    }


def measure(args, replicas: int) -> dict:
    env = os.environ | {
        "OPTSERVE_SERVE__HTTP_PORT": str(args.http_port),
        "OPTSERVE_SERVE__GRPC_PORT": str(args.grpc_port),
        "OPTSERVE_SERVE__INGRESS_REPLICAS": str(replicas),
    }
    http_url, grpc_target = f"http://127.0.0.1:{args.http_port}", f"127.0.0.1:{args.grpc_port}"
    OUT.mkdir(parents=True, exist_ok=True)
    log = (OUT / f"serve-{replicas}.log").open("w")
    started = time.monotonic()
    command = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "optserve"), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, stopped as a whole at the end
    )  # fmt: skip
    root = psutil.Process(command.pid)
    try:
        poll(lambda: _ready(http_url), 600, "the service to be ready")
        poll(lambda: len(ingress_replicas(root)) == replicas, 120, f"{replicas} ingress replicas")
        ready_s = time.monotonic() - started
        print(f"{replicas} ingress replica(s): ready in {ready_s:.1f} s", flush=True)
        time.sleep(args.settle_s)  # startup work (model load, first health checks) ends
        costs = _idle_costs(ingress_replicas(root), args.idle_s)
        print(f"  idle: {costs}", flush=True)
        kill = _kill_one_under_load(args, root, grpc_target)
        print(f"  kill: { {k: v for k, v in kill.items() if k != 'call_log'} }", flush=True)
    finally:
        os.killpg(command.pid, signal.SIGTERM)
        try:
            command.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait(timeout=30)
        log.close()
    return {"replicas": replicas, "ready_s": ready_s, "idle": costs, "kill": kill}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--settle-s", type=float, default=20.0)
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--warm-s", type=float, default=10.0)
    parser.add_argument("--after-s", type=float, default=40.0)
    parser.add_argument("--http-port", type=int, default=28500)
    parser.add_argument("--grpc-port", type=int, default=29500)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--report", help="write the section from this results.json of an earlier run")
    args = parser.parse_args()
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        for result in saved["results"]:
            kill = result["kill"]
            ends = sorted(ended for _, ended, code, _ in kill["call_log"] if code == "OK")
            gaps = [b - a for a, b in zip(ends, ends[1:], strict=False) if b > kill["killed_at_s"]]
            kill["no_ok_answer_s"] = max(gaps, default=None)
        report(args, saved["results"], *saved["load"], saved["date"])
        return
    load_before = os.getloadavg()
    results = [measure(args, n) for n in args.replicas]
    load_after = os.getloadavg()
    saved = {"results": results, "load": [load_before, load_after], "date": utc_now()}
    (OUT / "results.json").write_text(json.dumps(saved, indent=1) + "\n")
    if not args.no_write:
        report(args, results, load_before, load_after, saved["date"])


def report(args, results: list[dict], load_before, load_after, date: str) -> None:
    rows = []
    for result in results:
        idle, kill = result["idle"], result["kill"]
        rss = " + ".join(f"{c['rss_mib']:.0f}" for c in idle)
        uss = " + ".join(f"{c['uss_mib']:.0f}" for c in idle)
        cpu = " + ".join(f"{c['idle_cpu_percent']:.1f}" for c in idle)
        recovery = "-" if kill["recovery_s"] is None else f"{kill['recovery_s']:.1f}"
        gap = "-" if kill["no_ok_answer_s"] is None else f"{kill['no_ok_answer_s']:.1f}"
        rows.append(
            f"| {result['replicas']} | {result['ready_s']:.0f} | {rss} | {uss} | {cpu} | {kill['calls']} | "
            f"{kill['in_flight_at_kill']} | {kill['failed'] or 0} | {recovery} | {gap} | "
            f"{kill['slowest_call_s']:.1f} |"
        )
    messages = sorted({m for r in results for m in r["kill"]["failed_messages"]})
    write_section(
        "ingress",
        f"""## One or two ingress replicas: their cost and a killed ingress (issue 38)

- date: {date}; machine: {machine()} (shared with other jobs; `nice -n 10`); load average (1, 5, 15 min)
  {", ".join(f"{x:.1f}" for x in load_before)} before, {", ".join(f"{x:.1f}" for x in load_after)} after
- command: `nice -n 10 python benchmarks/reliability_ingress.py \
--replicas {" ".join(map(str, args.replicas))} --users {args.users} --settle-s {args.settle_s:g} \
--idle-s {args.idle_s:g} --after-s {args.after_s:g}`
- service: `optserve serve` with default settings (bundled model, Ray's CPUs = the machine's),
  `OPTSERVE_SERVE__INGRESS_REPLICAS` = the count; ready: from the command's start until `/v2/health/ready`
  is 200 with every ingress replica running; memory and CPU of each Ingress replica process over
  {args.idle_s:g} s idle; then {args.users} gRPC threads send Optimize one after another (greedy, add.ll,
  cache bypassed, deadline {CALL_DEADLINE_S:g} s; the client retries UNAVAILABLE / RESOURCE_EXHAUSTED until
  the deadline, and INTERNAL for a call whose replica died), one Ingress replica is SIGKILLed after
  {args.warm_s:g} s and the load goes on {args.after_s:g} s
- recovery: from the kill until a call sent after it is answered OK; no OK answer: the longest time between
  two OK answers after the kill; calls, kill and answers: runs/reliability_ingress/results.json

{HEADER}
{chr(10).join(rows)}

Messages of the failed calls: {"; ".join(messages) or "none"}
""",
    )


if __name__ == "__main__":
    main()
