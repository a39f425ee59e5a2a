"""Load-test scenarios run headless against a real service, bounded in time; locust CSV is summarized."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clients_helpers import HTTP_PORT

RUN_HEADLESS = Path(__file__).resolve().parents[2] / "loadtests" / "run_headless.py"


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
