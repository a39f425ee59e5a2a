"""`optserve autotune FILE --budget N --json`."""

from __future__ import annotations

import json
import subprocess
import sys

from optserve.compiler.passes import parse_pass_list, to_opt_pipeline
from optserve.compiler.pipeline import evaluate


def run_cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "optserve.cli", "autotune", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_autotune_json(tmp_path, c_ir):
    source = tmp_path / "switch.ll"
    source.write_text(c_ir["switch"])
    completed = run_cli(str(source), "--budget", "40", "--workers", "1", "--seed", "3", "--json")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    best = parse_pass_list(result["best_pass_list"])
    assert result["objective"] == "instruction_count" and result["seed"] == 3
    assert result["oz_cost"] == evaluate(c_ir["switch"], ("-Oz",), "instruction_count").cost
    assert (
        result["best_cost"] == evaluate(c_ir["switch"], best, "instruction_count").cost <= result["oz_cost"]
    )
    assert result["opt_pipeline"] == to_opt_pipeline(best)
    assert result["search_compilations"] <= 40
    assert completed.stderr == ""  # no progress bar when stderr is not a terminal


def test_autotune_text_size_human_output(tmp_path, typed_pointer_ir):
    source = tmp_path / "typed.ll"
    source.write_text(typed_pointer_ir)
    completed = run_cli(str(source), "--budget", "10", "--workers", "1", "--objective", "text_size")
    assert completed.returncode == 0, completed.stderr
    assert "(text_size)" in completed.stdout and "-Oz cost:" in completed.stdout


def test_autotune_rejects_malformed_ir_with_a_clear_message(ir_fixtures):
    completed = run_cli(str(ir_fixtures / "syntax_error.ll"), "--budget", "10")
    assert completed.returncode == 2
    assert "syntax_error.ll: IR does not parse: line 6, column 3" in completed.stderr
    assert run_cli("/nonexistent.ll", "--budget", "10").returncode == 2
    assert "must be a positive integer" in run_cli("x.ll", "--budget", "0").stderr
