"""What an idle service costs in CPU, process by process: the load a build pays beside it.

    python benchmarks/serve_idle_cpu.py [--rounds 3] [--window 60] [--settle 20] [--config FILE] \
        [--ab NAME=VALUE ...] [--http-port 28720 --grpc-port 29720]

Each round starts `optserve serve` (its own session, the ports given, a scratch tuning folder), waits until
`/v2/health/ready` answers 200 and `--settle` seconds more (the replicas' start-up work done), then reads
every process of the service's session from /proc (user and system CPU of all its threads) at the start
and the end of `--window` seconds, and stops the service (SIGTERM to its process group, SIGKILL after 45 s).
Printed per round: cores (CPU seconds per wall second) of each process, named by its role (Ray's title or
program: raylet, gcs_server, dashboard.py, ray::ServeController, ray::ServeReplica:optserve:Ingress,
VLLM::EngineCore, ...), and the total; processes of one role are summed. A process that ends inside the
window is left out (its time is lost with it; the count of such processes is printed).

--ab NAME=VALUE: A/B rounds, alternating: A is the environment as given, B adds the variables named (e.g.
`--ab RAY_USAGE_STATS_ENABLED=0`); the table then gives each role's median over its side's rounds.
The machine's load average is printed at each round's start (other work on the machine runs in the same
window; the service's own processes are the only ones counted).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 300.0
STOP_GRACE_S = 45.0


def session_processes(session: int) -> dict[int, tuple[str, float]]:
    """{pid: (role, CPU seconds)} of every process in `session` (/proc/PID/stat: utime + stime)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
        if int(fields[3]) != session:  # field 6 of stat: the session id
            continue
        found[int(entry)] = (role(cmdline), (int(fields[11]) + int(fields[12])) / TICKS)
    return found


def role(cmdline: list[bytes]) -> str:
    """A process's role: Ray's process title (`ray::...`, `VLLM::...`), else its program or script name."""
    words = [w.decode(errors="replace") for w in cmdline if w]
    if not words:
        return "?"
    if "::" in words[0]:
        title = words[0].split(".", 1)[0]  # `ray::ServeReplica:optserve:Ingress.method` names a method
        return title.split()[0]
    program = Path(words[0]).name
    if program.startswith("python") and len(words) > 1:
        script = words[2] if words[1] in ("-u", "-B", "-m", "-P") and len(words) > 2 else words[1]
        if words[1] == "-m" or (len(words) > 2 and words[2] == "-m"):
            script = words[words.index("-m") + 1]
        elif script == "-c":
            script = "python -c " + " ".join(words[words.index("-c") + 1 :])[:40]
        return Path(script).name
    return program


def wait_ready(url: str, service: subprocess.Popen) -> float:
    started = time.monotonic()
    while time.monotonic() - started < READY_TIMEOUT_S:
        if service.poll() is not None:
            raise SystemExit(f"the service exited ({service.returncode}) before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(1.0)  # polling the service's start, bounded by READY_TIMEOUT_S
    raise SystemExit(f"not ready within {READY_TIMEOUT_S:.0f} s: {url}")


def stop(service: subprocess.Popen) -> None:
    """SIGTERM to the service's process group; SIGKILL to what is left of it after STOP_GRACE_S."""
    try:
        os.killpg(service.pid, signal.SIGTERM)
        service.wait(STOP_GRACE_S)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(service.pid, signal.SIGKILL)
    service.wait()


def one_round(args, extra_env: dict[str, str], log: Path) -> dict[str, float]:
    """{role: cores} of one fresh service, idle for the window."""
    env = dict(os.environ) | extra_env
    env |= {
        "OPTSERVE_SERVE__HTTP_PORT": str(args.http_port),
        "OPTSERVE_SERVE__GRPC_PORT": str(args.grpc_port),
        "OPTSERVE_TUNING_DIR": tempfile.mkdtemp(prefix="idle-cpu-tuning-"),
    }
    command = [str(Path(sys.executable).parent / "optserve"), "serve"]
    if args.config:
        command += ["--config", str(args.config)]
    with log.open("ab") as out:
        service = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        ready_s = wait_ready(f"http://127.0.0.1:{args.http_port}/v2/health/ready", service)
        time.sleep(args.settle)
        before = session_processes(service.pid)
        started = time.monotonic()
        time.sleep(args.window)
        after = session_processes(service.pid)
        wall = time.monotonic() - started
    finally:
        stop(service)
    cores: dict[str, float] = defaultdict(float)
    for pid, (name, seconds) in after.items():
        cores[name] += (seconds - before.get(pid, (name, 0.0))[1]) / wall
    gone = len(set(before) - set(after))
    print(f"  ready in {ready_s:.0f} s; {len(after)} processes, {gone} ended in the window", flush=True)
    return dict(cores)


def print_table(sides: dict[str, list[dict[str, float]]]) -> None:
    roles = sorted({r for rounds in sides.values() for cores in rounds for r in cores})
    names = list(sides)
    medians = {
        side: {r: statistics.median(c.get(r, 0.0) for c in rounds) for r in roles}
        for side, rounds in sides.items()
    }
    order = sorted(roles, key=lambda r: -max(medians[s][r] for s in names))
    print(f"\n{'process (role)':52}" + "".join(f"{s:>14}" for s in names))
    for r in order:
        print(f"{r[:52]:52}" + "".join(f"{medians[s][r]:14.4f}" for s in names))
    totals = {s: statistics.median(sum(c.values()) for c in rounds) for s, rounds in sides.items()}
    print(f"{'total (median of the rounds)':52}" + "".join(f"{totals[s]:14.4f}" for s in names))
    for s in names:
        print(f"{s}: totals per round " + ", ".join(f"{sum(c.values()):.3f}" for c in sides[s]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side")
    parser.add_argument("--window", type=float, default=60.0, help="idle seconds measured")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds after ready before measuring")
    parser.add_argument("--config", type=Path)
    parser.add_argument("--ab", nargs="*", default=[], metavar="NAME=VALUE", help="B's extra environment")
    parser.add_argument("--http-port", type=int, default=28720)
    parser.add_argument("--grpc-port", type=int, default=29720)
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "serve_idle_cpu.log")
    args = parser.parse_args()
    b_env = dict(item.split("=", 1) for item in args.ab)
    sides: dict[str, list[dict[str, float]]] = {"A": []} | ({"B": []} if b_env else {})
    for number in range(args.rounds):
        for side in sides:
            load = os.getloadavg()
            print(f"round {number + 1} {side}: load average {load[0]:.2f} {load[1]:.2f}", flush=True)
            sides[side].append(one_round(args, b_env if side == "B" else {}, args.log))
    if b_env:
        print("B: " + " ".join(args.ab))
    print_table(sides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
