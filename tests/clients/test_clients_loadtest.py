"""Load-test scenarios run headless against a real service, bounded in time; locust CSV is summarized."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.clients_helpers import HTTP_PORT

LOADTESTS = Path(__file__).resolve().parents[2] / "loadtests"
RUN_HEADLESS = LOADTESTS / "run_headless.py"
LOCUSTFILE = LOADTESTS / "locustfile.py"
LOCUST = Path(sys.executable).with_name("locust")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_headless_scenario_writes_csv_and_summary(protocol, optserve_target, tmp_path):
    command = [
        sys.executable, str(RUN_HEADLESS), "--protocol", protocol, "--users", "2", "--run-time", "8",
        "--schedule-limit", "0.5", "--grpc-target", optserve_target,
        "--http-url", f"http://127.0.0.1:{HTTP_PORT}", "--out", str(tmp_path), "--workload-size", "20",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    (scenario,) = tmp_path.iterdir()
    summary = json.loads((scenario / "summary.json").read_text())
    assert summary["requests"] > 0
    assert summary["failures"] == 0, (scenario / "locust.log").read_text()[-2000:]
    assert summary["optimize_requests"] > 0
    assert (scenario / "locust_stats.csv").exists()
    assert f"| {protocol} greedy@1 | 2 |" in done.stdout


@pytest.mark.slow
def test_plain_locust_cli_runs_the_built_in_workload(optserve_target, tmp_path):
    """`locust -f loadtests/locustfile.py` as a user runs it: no wrapper, no environment, both protocols."""
    command = [
        str(LOCUST), "-f", str(LOCUSTFILE), "--headless", "-u", "2", "-r", "2", "-t", "5s",
        "--host", f"http://127.0.0.1:{HTTP_PORT}", "--grpc-target", optserve_target,
        "--schedule-limit", "0.5", "--stop-timeout", "30", "--csv", str(tmp_path / "locust"),
        "--only-summary",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "locust_stats.csv").open()))
    total = next(row for row in rows if row["Name"] == "Aggregated")
    assert int(total["Request Count"]) > 0 and int(total["Failure Count"]) == 0, done.stderr[-3000:]
    # Two users, one of each class: both protocols were called.
    assert {row["Type"] for row in rows if row["Name"] != "Aggregated"} >= {"grpc", "POST"}
