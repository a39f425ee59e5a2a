"""optcc as a build uses it: `make CC=optcc CFLAGS=-Oz` of a multi-file C program, service up and down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optserve.compiler.cost import text_size
from tests.clients.clients_helpers import fake_optimize_service

OPTCC = Path(sys.executable).with_name("optcc")
FALLBACK_NOTICE = "using clang-19 -Oz instead"
UNITS = ["main.c", "table.c", "text.c", "checksum.c"]


def build(program: Path, cc: str, cflags: str, *targets: str, **env: str) -> subprocess.CompletedProcess:
    environment = os.environ | {"TMPDIR": str(program.parent)} | env
    return subprocess.run(
        ["make", "-s", f"CC={cc}", f"CFLAGS={cflags}", *targets],
        cwd=program,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_program(program: Path) -> str:
    with open(program / "input.txt") as stdin:
        return subprocess.run(
            [program / "wordstat"], stdin=stdin, capture_output=True, text=True, check=True
        ).stdout


@pytest.fixture
def oz_output(tmp_path_factory) -> str:
    """What the program prints when built with plain clang -Oz."""
    import shutil

    from tests.clients.clients_helpers import PROGRAM

    program = Path(shutil.copytree(PROGRAM, tmp_path_factory.mktemp("oz") / "wordstat"))
    assert build(program, "clang-19", "-Oz").returncode == 0
    return run_program(program)


def log_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_build_with_service_behaves_like_clang_oz(program, optserve_target, oz_output):
    log = program / "optcc.jsonl"
    result = build(program, str(OPTCC), "-Oz -g", OPTCC_SERVER=optserve_target, OPTCC_LOG=str(log))
    assert result.returncode == 0, result.stderr
    assert FALLBACK_NOTICE not in result.stderr
    assert run_program(program) == oz_output
    records = log_records(log)
    assert sorted(r["source"] for r in records) == sorted(UNITS)
    assert {r["outcome"] for r in records} == {"service"}
    assert all(r["cost"] <= r["oz_cost"] for r in records)
    assert all(r["winner"] in ("service", "clang") and r["level"] == "-Oz" for r in records)


@pytest.mark.slow
def test_each_object_is_the_winner_the_log_names(program, optserve_target):
    """The service's object is the one it measured; clang's is clang-19 -Oz's own, byte for byte."""
    assert build(program, "clang-19", "-Oz").returncode == 0
    clang_objects = {unit: (program / unit).with_suffix(".o").read_bytes() for unit in UNITS}
    assert build(program, "clang-19", "-Oz", "clean").returncode == 0
    log = program / "optcc.jsonl"
    env = {"OPTCC_SERVER": optserve_target, "OPTCC_LOG": str(log), "OPTCC_OBJECTIVE": "text_size"}
    assert build(program, str(OPTCC), "-Oz", **env).returncode == 0
    for record in log_records(log):
        written = (program / record["output"]).read_bytes()
        if record["winner"] == "service":
            assert text_size(written) == record["cost"] == record["service_text"] < record["clang_text"]
        else:
            assert written == clang_objects[record["source"]]
            assert text_size(written) == record["clang_text"] <= record["service_text"]


@pytest.mark.slow
def test_objects_are_no_larger_than_clang_oz(program, optserve_target):
    """The promise, unit by unit: never more .text than clang-19 -Oz."""
    env = {"OPTCC_SERVER": optserve_target, "OPTCC_OBJECTIVE": "text_size"}
    assert build(program, "clang-19", "-Oz").returncode == 0
    oz_text = {unit: text_size((program / unit).with_suffix(".o").read_bytes()) for unit in UNITS}
    assert build(program, "clang-19", "-Oz", "clean").returncode == 0
    assert build(program, str(OPTCC), "-Oz", **env).returncode == 0
    for unit in UNITS:
        assert text_size((program / unit).with_suffix(".o").read_bytes()) <= oz_text[unit]


def test_build_with_service_down_falls_back_to_clang_oz_and_says_so_once(program, oz_output):
    log = program / "optcc.jsonl"
    env = {"OPTCC_SERVER": f"127.0.0.1:{unused_port()}", "OPTCC_LOG": str(log)}
    result = build(program, str(OPTCC), "-Oz -g", **env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(FALLBACK_NOTICE) == 1
    assert run_program(program) == oz_output
    assert [r["outcome"] for r in log_records(log)] == ["fallback"] * len(UNITS)


def test_a_service_that_never_answers_costs_one_deadline_per_build(program, oz_output):
    log = program / "optcc.jsonl"
    with socket.socket() as silent:  # accepts connections, never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        env = {
            "OPTCC_SERVER": f"127.0.0.1:{silent.getsockname()[1]}",
            "OPTCC_DEADLINE": "0.5",
            "OPTCC_LOG": str(log),
        }
        started = time.monotonic()
        result = build(program, str(OPTCC), "-Oz", **env)
        elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(FALLBACK_NOTICE) == 1
    assert run_program(program) == oz_output
    reasons = [r["reason"] for r in log_records(log)]
    assert "DEADLINE_EXCEEDED" in reasons[0]
    assert all("unreachable earlier in this build" in reason for reason in reasons[1:])
    assert elapsed < 2 * (0.5 + 5.0)  # one client timeout (deadline + margin), not one per unit


@pytest.mark.slow
def test_the_service_s_deadline_per_unit_is_a_multiple_of_clang_s_compile_time(program, optserve_target):
    """OPTCC_BUDGET: the service is asked once clang's front end (the IR step) ended, with a deadline of that
    many times its wall time less OPTCC_CALL_OVERHEAD, never more than OPTCC_DEADLINE; a unit whose deadline
    would be below OPTCC_BUDGET_MIN is not sent."""
    log = program / "optcc.jsonl"
    # 20 x the front end: these units' front ends take a few hundredths of a second
    env = {"OPTCC_BUDGET": "20", "OPTCC_CALL_OVERHEAD": "0.1", "OPTCC_BUDGET_MIN": "0.05"}
    env["OPTCC_DEADLINE"] = "20"
    assert (
        build(program, str(OPTCC), "-Oz", OPTCC_SERVER=optserve_target, OPTCC_LOG=str(log), **env).returncode
        == 0
    )
    records = log_records(log)
    assert sorted(r["source"] for r in records) == sorted(UNITS)
    for record in records:
        allowed = 20 * record["ir_step_s"] - 0.1
        if record["outcome"] == "not_asked":
            assert allowed < 0.05 and "service_s" not in record
            continue
        assert record["deadline_s"] == round(min(20.0, allowed), 3)
        assert record["asked_s"] >= record["ir_step_s"]  # with the front end's time known
    assert any(r["outcome"] == "service" for r in records)


def test_a_service_that_answers_deadline_exceeded_is_asked_again_by_later_units(program, oz_output):
    """A unit whose budget the service could not meet falls back to clang's object; the service answered, so
    it is not taken for unreachable: the build's other units still ask it."""
    import grpc

    def optimize(request, context):
        context.abort(
            grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded while waiting for the -Oz baseline"
        )

    log = program / "optcc.jsonl"
    with fake_optimize_service(optimize, workers=4) as target:
        result = build(program, str(OPTCC), "-Oz", OPTCC_SERVER=target, OPTCC_LOG=str(log))
    assert result.returncode == 0, result.stderr
    assert run_program(program) == oz_output
    reasons = [r["reason"] for r in log_records(log)]
    assert len(reasons) == len(UNITS) and all("answered DEADLINE_EXCEEDED" in reason for reason in reasons)


def test_compile_errors_fail_the_build_as_clang_does(program):
    (program / "text.c").write_text("int broken(void) { return undeclared; }\n")
    result = build(program, str(OPTCC), "-Oz", "text.o", OPTCC_SERVER=f"127.0.0.1:{unused_port()}")
    assert result.returncode != 0
    assert "use of undeclared identifier 'undeclared'" in result.stderr
    assert FALLBACK_NOTICE not in result.stderr


def test_non_compile_commands_go_to_clang_unchanged(program):
    env = os.environ | {"OPTCC_SERVER": f"127.0.0.1:{unused_port()}", "TMPDIR": str(program.parent)}
    result = subprocess.run(
        [OPTCC, "-E", "-dM", "-I.", "checksum.c"], cwd=program, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0
    assert "#define WORDSTAT_H" in result.stdout
    assert result.stderr == ""


def test_bad_settings_fall_back_with_the_reason(program, oz_output):
    result = build(program, str(OPTCC), "-Oz", OPTCC_OBJECTIVE="speed")
    assert result.returncode == 0
    assert "OPTCC_OBJECTIVE='speed' is not one of instruction_count, text_size" in result.stderr
    assert run_program(program) == oz_output


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("OPTCC_CACHE_SIZE", "lots", "OPTCC_CACHE_SIZE='lots' is not a size such as 500M or 5G"),
        ("OPTCC_LARGE_UNIT", "-1K", "OPTCC_LARGE_UNIT='-1K' must not be negative"),
        ("OPTCC_BUDGET", "-2", "OPTCC_BUDGET=-2.0 must not be negative"),
    ],
)
def test_bad_sizes_and_budgets_fall_back_with_the_reason(program, oz_output, variable, value, complaint):
    result = build(program, str(OPTCC), "-Oz", OPTCC_SERVER=f"127.0.0.1:{unused_port()}", **{variable: value})
    assert result.returncode == 0 and complaint in result.stderr
    assert run_program(program) == oz_output


@pytest.mark.slow
def test_a_unit_larger_than_the_large_unit_size_goes_with_the_coreset(program, optserve_target):
    """OPTCC_LARGE_UNIT: a unit about as long as the model's context (or longer) is sent with the coreset's
    first lists, no model call; smaller units keep the strategy set (greedy)."""
    log = program / "optcc.jsonl"
    sizes = {"OPTCC_SERVER": optserve_target, "OPTCC_LOG": str(log), "OPTCC_LARGE_UNIT": "5K"}
    assert build(program, str(OPTCC), "-Oz", **sizes).returncode == 0
    records = log_records(log)
    assert {r["outcome"] for r in records} == {"service"}
    for record in records:
        large = record["bitcode_bytes"] > 5 * 1024
        assert (record["strategy"], record["samples"]) == (("coreset", 4) if large else ("greedy", 1))
    assert {r["bitcode_bytes"] > 5 * 1024 for r in records} == {True, False}  # both kinds in wordstat
