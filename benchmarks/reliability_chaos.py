"""Chaos soak: mixed Optimize/Schedule load from locust and repeated real builds through optcc,
while each kind of process of the service is SIGKILLed in turn; lost builds, wrong objects, the status of
every failed call and the time to recover from each kill.

    nice -n 10 python benchmarks/reliability_chaos.py --minutes 11.5 --every-s 55  # docs/bench/reliability.md

What runs, all against one service this script starts (local Ray below this process, the serve tests' tiny
stand-in model, its default ingress replicas, the ingress result cache off so that every call does its work,
the tuning store in a private PostgreSQL server; ports 28700/29700 unless given):
- load: locust's GrpcApiUser (loadtests/locustfile.py: Optimize and Schedule 4:1, greedy, cache bypassed,
  its default workload) with `--users` users, and two probe threads, one Optimize and one Schedule after
  another (one try each, no client retry), whose calls are timed one by one: recovery times come from them;
- builds: mxml 3.3.1 (data/real/sources/mxml, `./configure --disable-shared`, CFLAGS=-Oz) built once with
  clang-19 for reference, then over and over `make clean && make -j4 libmxml.a testmxml && make test` with
  CC=optcc (greedy, object cache off, OPTCC_BUDGET=0: every unit asks the service). A build is lost when
  a step exits non-zero; an object is wrong when its `.text` is larger than clang-19 -Oz's of the same unit;
- chaos: every `--every-s` a SIGKILL to the next kind in turn: an ingress replica, the PassOrderingEngine
  replica, a compiler worker (a child of the CompilerWorkers replica), the CompilerWorkers replica, the
  LoopTuneScheduler replica, the tuning store's PostgreSQL server (its postmaster; started again
  `--db-down-s` later, as after an outage).

A kill's recovery: from the kill until a probe call sent after it is answered OK (Optimize; Schedule for the
LoopTune replica). UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are retryable; any other failed
status is a finding and is listed with its message. Outputs: runs/reliability_chaos/ (calls.json, builds,
locust's CSVs).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

from optserve.testing.postgres import PostgresServer
from optserve.testing.reliability_report import REPO, machine, utc_now, write_section
from optserve.testing.service import TOKEN, build_tiny_model, replica_pids, service_settings

OUT = REPO / "runs" / "reliability_chaos"
BIN = Path(sys.executable).parent
MXML = REPO / "data" / "real" / "sources" / "mxml" / "mxml-3.3.1"
RETRYABLE = {"UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"}
KINDS = ("ingress replica", "engine replica", "compiler worker", "compiler replica", "LoopTune replica",
         "tuning database")  # fmt: skip
NEST = ("C[i,j] += A[i,k] * B[k,j]", {"i": 64, "j": 64, "k": 64})
BUILD = "make -j4 libmxml.a testmxml"
PROBE_GAP_S = 0.25  # between a probe's calls: the cached Schedule answers in ~5 ms


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class TuningDatabase:
    """The tuning store's PostgreSQL server (optserve/testing/postgres.py), killed and started again."""

    def __init__(self) -> None:
        self.server = PostgresServer()

    def kill(self) -> int | None:
        """SIGKILL the postmaster (its backends notice and exit); its pid."""
        pid = int((self.server.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        return pid

    def start(self) -> float:
        """Start the server again (pg_ctl, retried while the killed one's backends still exit); seconds."""
        started = time.monotonic()
        while True:
            try:
                self.server._run(
                    "pg_ctl", "-D", str(self.server.data), "-o", self.server.options,
                    "-l", str(self.server.root / "log"), "-w", "start",
                )  # fmt: skip
                return time.monotonic() - started
            except subprocess.CalledProcessError:
                if time.monotonic() - started > 60:
                    raise
                time.sleep(1)


def _victim(kind: str, rng: random.Random) -> int | None:
    """The pid of a live process of `kind` (not the database), or None."""
    deployment = {
        "ingress replica": "Ingress",
        "engine replica": "PassOrderingEngine",
        "compiler replica": "CompilerWorkers",
        "LoopTune replica": "LoopTuneScheduler",
    }.get(kind, "CompilerWorkers")
    pids = replica_pids(deployment)
    if kind == "compiler worker":
        pids = [c.pid for pid in pids for c in psutil.Process(pid).children() if c.is_running()]
    return rng.choice(pids) if pids else None


class Builds:
    """mxml built again and again through optcc; each build's steps, objects and optcc's unit outcomes."""

    def __init__(self, grpc_target: str, work: Path) -> None:
        self.work = work
        self.results: list[dict] = []
        self.clang_text = self._reference()
        self.tree = self._fresh("optcc")
        self.env = self._environment(self.tree) | {
            "CC": str(BIN / "optcc"),
            "CFLAGS": "-Oz",
            "OPTCC_SERVER": grpc_target,
            "OPTSERVE_TOKEN": TOKEN,
            "OPTCC_STRATEGY": "greedy",  # "stored" with an empty store keeps clang's object, nothing compiled
            "OPTCC_CACHE": "0",
            "OPTCC_BUDGET": "0",
            "OPTCC_RESIDENT": "0",
        }
        self._run("./configure --disable-shared", self.tree, self.env, check=True)

    def _environment(self, tree: Path) -> dict[str, str]:
        (tree / ".tmp").mkdir(exist_ok=True)
        return dict(os.environ) | {"TMPDIR": str(tree / ".tmp")}

    def _fresh(self, name: str) -> Path:
        tree = self.work / f"mxml-{name}"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(MXML, tree, symlinks=True)
        subprocess.run("make distclean >/dev/null 2>&1; rm -f *.o *.a", shell=True, cwd=tree)
        return tree

    @staticmethod
    def _run(command: str, tree: Path, env: dict, check=False) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["bash", "-c", command], cwd=tree, env=env, capture_output=True, text=True, start_new_session=True
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{command} failed in {tree}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done

    def _reference(self) -> dict[str, int]:
        """`.text` bytes of every object of a clang-19 -Oz build of the same tree."""
        tree = self._fresh("clang")
        env = self._environment(tree) | {"CC": "clang-19", "CFLAGS": "-Oz"}
        self._run(f"./configure --disable-shared && {BUILD} && make test", tree, env, check=True)
        return self._objects(tree)

    @staticmethod
    def _objects(tree: Path) -> dict[str, int]:
        from optserve.clients import elf

        return {path.name: elf.text_size(path.read_bytes()) for path in sorted(tree.glob("*.o"))}

    def once(self, number: int, t0: float) -> dict:
        log = self.work / f"build-{number:03d}.jsonl"
        env = self.env | {"OPTCC_LOG": str(log)}
        started = time.monotonic()
        steps = {}
        for step, command in (("clean", "make clean"), ("build", BUILD), ("test", "make test")):
            done = self._run(command, self.tree, env)
            steps[step] = done.returncode
            if done.returncode != 0:
                (self.work / f"build-{number:03d}-{step}.out").write_text(done.stdout[-20000:] + done.stderr)
                break
        objects = self._objects(self.tree) if steps.get("build") == 0 else {}
        units = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        wrong = sorted(
            f"{name}: {text} > {self.clang_text.get(name)}"
            for name, text in objects.items()
            if name not in self.clang_text or text > self.clang_text[name]
        )
        result = {
            "build": number,
            "started_s": round(started - t0, 1),
            "seconds": round(time.monotonic() - started, 1),
            "steps": steps,
            "lost": any(rc != 0 for rc in steps.values()),
            "objects": len(objects),
            "missing": sorted(set(self.clang_text) - set(objects)) if objects else [],
            "wrong": wrong,
            "outcomes": dict(Counter(u["outcome"] for u in units)),
            "service_won": sum(1 for u in units if u.get("winner") == "service"),
            "fallbacks": [u.get("reason", "") for u in units if u["outcome"] == "fallback"],
        }
        self.results.append(result)
        return result


def start_locust(args, grpc_target: str) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "locust", "-f", str(REPO / "loadtests" / "locustfile.py"), "GrpcApiUser",
        "--headless", "--users", str(args.users), "--spawn-rate", str(args.users),
        "--run-time", f"{int(args.minutes * 60)}s", "--stop-timeout", "30", "--csv", str(OUT / "locust"),
        "--only-summary", "--loglevel", "WARNING", "--grpc-target", grpc_target, "--deadline", "20",
    ]  # fmt: skip
    env = dict(os.environ) | {"OPTSERVE_TOKEN": TOKEN}
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=open(OUT / "locust.out", "w"), stderr=subprocess.STDOUT
    )


def locust_results() -> dict:
    """Requests and failures per call name from locust's CSVs, failures by gRPC status."""
    stats, failures = OUT / "locust_stats.csv", OUT / "locust_failures.csv"
    calls = {}
    if stats.exists():
        for row in csv.DictReader(stats.open()):
            if row["Name"] != "Aggregated":
                calls[row["Name"]] = {
                    "requests": int(row["Request Count"]),
                    "failures": int(row["Failure Count"]),
                    "p50_ms": row["50%"],
                    "p99_ms": row["99%"],
                }
    statuses: Counter = Counter()
    messages = []
    if failures.exists():
        for row in csv.DictReader(failures.open()):
            match = re.search(r"([A-Z_]{5,}):", row["Error"])
            status = match.group(1) if match else "OTHER"
            statuses[status] += int(row["Occurrences"])
            if status not in RETRYABLE:
                messages.append(f"{row['Name']}: {row['Error'][:300]} x{row['Occurrences']}")
    return {"calls": calls, "statuses": dict(statuses), "not_retryable": messages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=11.5)
    parser.add_argument("--users", type=int, default=2, help="locust users")
    parser.add_argument("--every-s", type=float, default=55.0, help="seconds between kills")
    parser.add_argument("--first-s", type=float, default=40.0, help="seconds of load before the first kill")
    parser.add_argument("--db-down-s", type=float, default=5.0, help="the database's outage")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--ingress-replicas", type=int, default=0, help="0: serve.ingress_replicas' default")
    parser.add_argument("--http-port", type=int, default=int(os.environ.get("CHAOS_HTTP_PORT", "28700")))
    parser.add_argument("--grpc-port", type=int, default=int(os.environ.get("CHAOS_GRPC_PORT", "29700")))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from optserve.clients.python.client import CallError, OptserveClient
    from optserve.config import ServeSettings
    from optserve.serve import server
    from optserve.serve.app import APP_NAME

    OUT.mkdir(parents=True, exist_ok=True)
    ingress_replicas = args.ingress_replicas or ServeSettings.model_fields["ingress_replicas"].default
    database = TuningDatabase()
    settings = service_settings(
        build_tiny_model(OUT / "tiny-model"),
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        ingress_replicas=ingress_replicas,
        result_cache_entries=0,
        max_queued_requests=16,
    )
    settings = settings.model_copy(
        update={"tuning": settings.tuning.model_copy(update={"store_url": database.server.url()})}
    )
    started = time.monotonic()
    endpoints = server.start(settings)
    print(
        f"service up in {time.monotonic() - started:.0f} s ({ingress_replicas} ingress replicas)", flush=True
    )
    calls: list[tuple[float, float, str, str, str]] = []  # (sent, seconds, call, code, message) since t0
    kills: list[tuple[float, str, int | None]] = []
    stop = threading.Event()
    try:
        builds = Builds(endpoints.grpc_target, OUT)
        print(f"clang reference: {len(builds.clang_text)} objects", flush=True)
        t0 = time.monotonic()
        locust = start_locust(args, endpoints.grpc_target)

        def probe(call: str) -> None:
            with OptserveClient(
                endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=None
            ) as client:
                modules = [(REPO / "tests" / "data" / "serve" / n).read_text() for n in ("add.ll", "sum.ll")]
                turn = 0
                while not stop.is_set():
                    sent = time.monotonic()
                    code, message = "OK", ""
                    try:
                        if call == "Optimize":
                            client.optimize(modules[turn % 2], bypass_cache=True, deadline_s=20)
                        else:
                            client.schedule(NEST[0], NEST[1], time_limit_s=2.0, measure=False)
                    except CallError as err:
                        code, message = err.code.name, str(err)[:300]
                    calls.append((sent - t0, time.monotonic() - sent, call, code, message))
                    turn += 1
                    stop.wait(PROBE_GAP_S)

        def build_loop() -> None:
            number = 0
            while not stop.is_set():
                result = builds.once(number, t0)
                print(f"{result['started_s']:6.1f} s: build {number}: {result['steps']} "
                      f"{result['outcomes']} wrong {len(result['wrong'])}", flush=True)  # fmt: skip
                number += 1

        def chaos() -> None:
            rng = random.Random(args.seed)
            turn = 0
            while not stop.wait(args.first_s if turn == 0 else args.every_s):
                kind = KINDS[turn % len(KINDS)]
                turn += 1
                at = time.monotonic() - t0
                try:
                    pid = database.kill() if kind == "tuning database" else _victim(kind, rng)
                    if pid is not None and kind != "tuning database":
                        os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, psutil.Error, OSError) as err:
                    print(f"{at:6.1f} s: no {kind} killed ({err})", flush=True)
                    continue
                kills.append((at, kind, pid))
                print(f"{at:6.1f} s: killed {kind} {pid}", flush=True)
                if kind == "tuning database":
                    time.sleep(args.db_down_s)
                    print(f"database started again in {database.start():.1f} s", flush=True)

        threads = [threading.Thread(target=probe, args=(c,), daemon=True) for c in ("Optimize", "Schedule")]
        threads += [
            threading.Thread(target=build_loop, daemon=True),
            threading.Thread(target=chaos, daemon=True),
        ]
        for thread in threads:
            thread.start()
        stop.wait(args.minutes * 60)
        stop.set()
        for thread in threads:
            thread.join(timeout=300)
        try:
            locust.wait(timeout=120)
        except subprocess.TimeoutExpired:
            locust.kill()
    finally:
        stop.set()
        server.stop()
        database.server.stop()
    report(args, ingress_replicas, calls, kills, builds.results, locust_results())


def _recovery(calls, at: float, call: str) -> str:
    answered = [
        sent + seconds
        for sent, seconds, name, code, _ in calls
        if name == call and code == "OK" and sent >= at
    ]
    return f"{min(answered) - at:.1f}" if answered else "not within the run"


def report(args, ingress_replicas: int, calls, kills, builds: list[dict], locust: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "calls.json").write_text(
        json.dumps({"calls": calls, "kills": kills, "builds": builds, "locust": locust}) + "\n"
    )
    rows = []
    for number, (at, kind, pid) in enumerate(kills):
        until = kills[number + 1][0] if number + 1 < len(kills) else float("inf")
        failed = Counter(
            f"{name} {code}"
            for sent, seconds, name, code, _ in calls
            if code != "OK" and at <= sent + seconds < until
        )
        fell_back = sum(
            len(b["fallbacks"])
            for b in builds
            if at <= b["started_s"] + b["seconds"] and b["started_s"] < until
        )
        rows.append(
            f"| {at:.0f} | {kind} (pid {pid}) | {_recovery(calls, at, 'Optimize')} | "
            f"{_recovery(calls, at, 'Schedule')} | {dict(failed) or '-'} | {fell_back} |"
        )
    probe_codes = Counter(f"{name} {code}" for _, _, name, code, _ in calls)
    findings = sorted(
        {f"{name} {code}: {message}" for _, _, name, code, message in calls if code not in RETRYABLE | {"OK"}}
    )
    findings += locust["not_retryable"]
    ok = {
        name: [s for _, s, n, code, _ in calls if n == name and code == "OK"]
        for name in ("Optimize", "Schedule")
    }
    lost = [b for b in builds if b["lost"]]
    wrong = [w for b in builds for w in b["wrong"]]
    units = Counter()
    for b in builds:
        units.update(b["outcomes"])
    fallbacks = Counter(re.sub(r"\(.*", "", reason)[:120] for b in builds for reason in b["fallbacks"])
    summary = [
        f"builds: {len(builds)} ({sum(1 for b in builds if not b['lost'])} passed `make test`), "
        f"**{len(lost)} lost, {len(wrong)} wrong objects**; units {dict(units)}, "
        f"service's object smaller than clang's in {sum(b['service_won'] for b in builds)}",
        f"optcc fallbacks (clang's object kept, the build goes on): {dict(fallbacks) or 'none'}",
        f"probe calls: {dict(probe_codes)}; OK latency p50 / p99: Optimize "
        f"{_percentile(ok['Optimize'], 0.5):.2f} / {_percentile(ok['Optimize'], 0.99):.2f} s, Schedule "
        f"{_percentile(ok['Schedule'], 0.5):.2f} / {_percentile(ok['Schedule'], 0.99):.2f} s",
        f"locust ({args.users} gRPC users): {locust['calls']}; "
        f"failures by status {locust['statuses'] or 'none'}",
    ]
    for b in lost:
        summary.append(f"lost build {b['build']} at {b['started_s']} s: steps {b['steps']}")
    print(*summary, *findings, *rows, sep="\n")
    if args.no_write:
        return
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    finding_lines = "".join(f"\n  - `{line[:400]}`" for line in findings) or " none"
    newline = "\n"
    write_section(
        "chaos",
        f"""## Chaos soak: every process kind killed under load and builds (issue 38)

- date: {utc_now()}; machine: {machine()} (shared with other jobs;
  `nice -n 10`); load average at the end (1 / 5 / 15 min): {load}
- command: `nice -n 10 python benchmarks/reliability_chaos.py --minutes {args.minutes:g} \
--users {args.users} --ingress-replicas {ingress_replicas} --every-s {args.every_s:g} \
--db-down-s {args.db_down_s:g} --seed {args.seed}`
- service: local Ray, tiny stand-in model (torch, CPU), 2 compiler workers, {ingress_replicas} ingress
  replicas (`serve.ingress_replicas`), result cache off, tuning store in PostgreSQL {database_version()}
- load for {args.minutes:g} min: locust GrpcApiUser x {args.users} (Optimize/Schedule 4:1), one Optimize and
  one Schedule probe thread (one try, no client retry), and mxml built again and again through optcc
  (`make clean && {BUILD} && make test`, CC=optcc, CFLAGS=-Oz, OPTCC_STRATEGY=greedy, object cache off,
  OPTCC_BUDGET=0)
- a SIGKILL every {args.every_s:g} s (first at {args.first_s:g} s) to each kind in turn:
  {", ".join(KINDS)} (the database's postmaster, started again {args.db_down_s:g} s later)
{newline.join(f"- {line}" for line in summary)}
- failed calls not retryable (UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED are):{finding_lines}
- per kill: recovery = seconds from the kill until a probe call sent after it was answered OK; the probes'
  calls not OK that ended before the next kill; optcc's fallbacks in the builds that ran then (calls, kills,
  builds: runs/reliability_chaos/calls.json)

| kill at (s) | victim | Optimize OK after (s) | Schedule OK after (s) | probes not OK | optcc fallbacks |
|---|---|---|---|---|---|
{newline.join(rows) or "| - | none | - | - | - | - |"}
""",
    )


def database_version() -> str:
    from optserve.testing.postgres import postgres_bin_dir

    return str(postgres_bin_dir()).split("/")[-2]


if __name__ == "__main__":
    main()
