"""Run one locust scenario against a running optserve, headless and bounded in time; write CSV and a summary.

    python loadtests/run_headless.py --protocol grpc --strategy priority --samples 10 --users 4 \
        --run-time 60 --grpc-target 127.0.0.1:29000 --http-url http://127.0.0.1:28000 --out runs/loadtests

Writes under --out/<scenario>/: workload.jsonl, locust's CSVs (stats, failures, history), summary.json; and
prints (and with --markdown appends to that file) one table row: users, requests, RPS, p50/p95/p99 of
Optimize and Schedule, failures. Locust runs in its own process (it must not share one with LLVM or Ray).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `loadtests` is a folder of the repository, not an installed package

from loadtests.workload import write_workload  # noqa: E402
from optserve.engine.interface import Strategy  # noqa: E402

USER_CLASSES = {"grpc": "GrpcApiUser", "http": "HttpApiUser"}
TABLE_HEADER = (
    "| scenario | users | requests | RPS | Optimize p50/p95/p99 (ms) | Schedule p50/p95/p99 (ms) "
    "| failures |\n"
    "|---|---|---|---|---|---|---|"
)


def run_scenario(args) -> dict:
    name = f"{args.protocol}-{args.strategy}{args.samples}-u{args.users}"
    out = args.out / name
    out.mkdir(parents=True, exist_ok=True)
    workload = out / "workload.jsonl"
    description = write_workload(workload, args.workload_size, args.seed)
    command = [
        sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"), USER_CLASSES[args.protocol],
        "--headless", "--users", str(args.users), "--spawn-rate", str(args.users),
        "--run-time", f"{args.run_time}s", "--stop-timeout", "30", "--host", args.http_url,
        "--csv", str(out / "locust"), "--csv-full-history", "--only-summary", "--loglevel", "WARNING",
        # the locustfile's own options (the token, if any, comes from $OPTSERVE_TOKEN)
        "--workload", str(workload), "--grpc-target", args.grpc_target, "--strategy", args.strategy,
        "--samples", str(args.samples), "--deadline", str(args.deadline),
        "--schedule-limit", str(args.schedule_limit),
    ]  # fmt: skip
    # Bounded: the run time, 30 s for requests in flight to finish, and start-up.
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.run_time + 120)
    (out / "locust.log").write_text(done.stdout + done.stderr)
    summary = {
        "scenario": name,
        "protocol": args.protocol,
        "strategy": args.strategy,
        "samples": args.samples,
        "users": args.users,
        "run_time_s": args.run_time,
        "workload": description,
        "locust_exit_code": done.returncode,  # 1 when any request failed
        **_read_stats(out / "locust_stats.csv"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _read_stats(path: Path) -> dict:
    rows = {row["Name"]: row for row in csv.DictReader(path.open())}

    def percentiles(row) -> str:
        return "/".join(row[p] for p in ("50%", "95%", "99%")) if row and int(row["Request Count"]) else "-"

    total = rows["Aggregated"]
    optimize = next((row for name, row in rows.items() if name.startswith("Optimize")), None)
    return {
        "requests": int(total["Request Count"]),
        "failures": int(total["Failure Count"]),
        "rps": round(float(total["Requests/s"]), 2),
        "optimize_requests": int(optimize["Request Count"]) if optimize else 0,
        "optimize_ms": percentiles(optimize),
        "schedule_ms": percentiles(rows.get("Schedule")),
    }


def table_row(summary: dict) -> str:
    return (
        f"| {summary['protocol']} {summary['strategy']}@{summary['samples']} | {summary['users']} | "
        f"{summary['requests']} | {summary['rps']} | {summary['optimize_ms']} | {summary['schedule_ms']} | "
        f"{summary['failures']} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--protocol", choices=sorted(USER_CLASSES), default="grpc")
    parser.add_argument("--strategy", choices=[s.value for s in Strategy], default=Strategy.GREEDY.value)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--run-time", type=int, default=60, help="seconds of load")
    parser.add_argument("--deadline", type=float, default=30.0, help="Optimize deadline_s")
    parser.add_argument("--schedule-limit", type=float, default=2.0, help="Schedule time_limit_s")
    parser.add_argument("--grpc-target", default="127.0.0.1:9000")
    parser.add_argument("--http-url", default="http://127.0.0.1:8000")
    parser.add_argument("--workload-size", type=int, default=300, help="IR functions in the mix")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/loadtests"))
    parser.add_argument("--markdown", type=Path, help="append the table row to this file")
    args = parser.parse_args()
    summary = run_scenario(args)
    print(json.dumps(summary, indent=2))
    print(TABLE_HEADER)
    print(table_row(summary))
    if args.markdown:
        with args.markdown.open("a") as markdown:
            markdown.write(table_row(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
