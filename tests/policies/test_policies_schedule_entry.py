"""The one schedule entry, `schedule_contraction`: the service's Schedule and `optserve schedule-local` parse
a contraction the same way and decide it with the same defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from optserve.cli import main
from optserve.config import LoopTuneSettings
from optserve.deadline import SCHEDULE_TIME_LIMIT_S
from optserve.kernels.spec import SpecError
from optserve.policies.methods import DEFAULT_METHOD
from optserve.policies.scheduler import default_time_limit_s, schedule_contraction

MATVEC = "y[m] += A[m,k] * x[k]"
MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def test_a_contraction_without_method_or_time_limit_gets_the_defaults():
    result = schedule_contraction(MATVEC, {"m": 64, "k": 256}, LoopTuneSettings(), measure=False)
    assert result.method == DEFAULT_METHOD and not result.cached


def test_the_default_time_limit_stays_within_the_settings_limit():
    assert default_time_limit_s(LoopTuneSettings()) == SCHEDULE_TIME_LIMIT_S
    assert default_time_limit_s(LoopTuneSettings(search_time_limit_s=2.0)) == 2.0


def test_schedule_local_decides_with_the_services_default_method(capsys):
    assert main(["schedule-local", "--einsum", MATVEC, "--sizes", "m=64,k=256", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["method"] == DEFAULT_METHOD


def test_a_malformed_contraction_is_refused_before_any_search():
    with pytest.raises(SpecError, match="expected"):
        schedule_contraction("y[m] = A[m,k] * x[k]", {"m": 4, "k": 4}, LoopTuneSettings())


def test_a_fresh_process_decides_with_its_whole_budget():
    """The first decision of a process (`optserve schedule-local`, a replica's first Schedule) loads torch
    and the network before its budget starts (policies/search.py `prepare`): inside it, the import used up
    the quick decision's 0.5 s and one candidate was timed and kept."""
    command = [sys.executable, "-m", "optserve.cli", "schedule-local", "--einsum", MATMUL]
    command += ["--sizes", "m=256,k=256,n=256", "--threads", "1", "--json"]
    # the deciding thread's CPU time: other processes on a busy host do not shorten the budget
    env = {**os.environ, "OPTSERVE_LOOPTUNE__BUDGET_CLOCK": "cpu"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=True)
    result = json.loads(done.stdout)
    assert result["evaluations"] >= 3, result
