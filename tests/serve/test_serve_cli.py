"""`optserve optimize`, `schedule` and `health` as a user runs them, against the running service."""

from __future__ import annotations

import json
import subprocess
import sys

from optserve.compiler.pipeline import evaluate
from optserve.testing.service import DATA, TOKEN


def optserve(service, *args: str) -> subprocess.CompletedProcess:
    endpoints, _ = service
    command = [
        sys.executable,
        "-m",
        "optserve.cli",
        *args,
        "--target",
        endpoints.grpc_target,
        "--token",
        TOKEN,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_optimize_prints_the_answer_as_json(service, tmp_path):
    output_ir = tmp_path / "out.ll"
    result = optserve(service, "optimize", str(DATA / "sum.ll"), "--json", "--output-ir", str(output_ir))
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    ir = (DATA / "sum.ll").read_text()
    assert answer["oz_cost"] == evaluate(ir, ("-Oz",), "instruction_count").cost
    assert answer["best"]["cost"] <= answer["oz_cost"]
    assert answer["best"]["source"] in {"model", "oz", "cache"}
    assert "define i32 @sum" in output_ir.read_text()


def test_optimize_renders_a_readable_summary(service):
    result = optserve(service, "optimize", str(DATA / "add.ll"), "--strategy", "priority", "--samples", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("best:") and "-Oz:" in result.stdout


def test_optimize_reports_a_bad_file_clearly(service, tmp_path):
    bad = tmp_path / "bad.ll"
    bad.write_text("this is not IR\n")
    result = optserve(service, "optimize", str(bad), "--json")
    assert result.returncode == 1
    assert result.stderr.startswith("error: INVALID_ARGUMENT: IR does not parse")


def test_schedule_prints_the_schedule_as_json(service):
    result = optserve(
        service, "schedule", "--einsum", "C[m,n] += A[m,k] * B[k,n]", "--sizes", "m=32,k=32,n=32",
        "--method", "base", "--threads", "1", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["measured"] and answer["gflops"] > 0 and answer["method"] == "base"
    assert answer["threads"] == 1 and answer["timed_sizes"] == {"m": 32, "k": 32, "n": 32}


def test_health_reports_every_service_and_the_model(service):
    result = optserve(service, "health", "--json")
    assert result.returncode == 0, result.stderr
    health = json.loads(result.stdout)
    assert health["server"] == health["optserve.v1.PassOrdering"] == "SERVING"
    assert health["model"]["name"] == "passformer-tiny-random" and health["model"]["ready"]
