"""The LoopTune replica's decisions in the tuning store (serve/replicas/deployments.py `schedule` over
policies/decision_cache.py's layered cache): a shape decided by one process is answered `cached`, without
search, by another one, or by the same one once its memory is gone; a real SQLite store, no service."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from optserve.config import Settings, TuningSettings
from optserve.policies.decision_cache import shared_decision_cache
from optserve.serve import schemas
from optserve.serve.replicas.deployments import decision_cache, schedule
from optserve.tuning.store import open_store

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
REPO_ROOT = Path(__file__).resolve().parents[2]

DECIDE_IN_ANOTHER_PROCESS = """
from optserve.config import Settings
from optserve.serve import schemas
from optserve.serve.replicas.deployments import schedule

request = schemas.ScheduleRequest(einsum={einsum!r}, sizes={sizes!r}, method="greedy1", time_limit_s=10.0,
                                  threads=1)
print(schedule(request, Settings()).model_dump_json())
"""


def _request(sizes: dict[str, int]) -> schemas.ScheduleRequest:
    return schemas.ScheduleRequest(einsum=MATMUL, sizes=sizes, method="greedy1", time_limit_s=10.0, threads=1)


def test_a_decision_another_process_made_is_answered_from_the_store(tmp_path):
    store_url = str(tmp_path / "tuning.sqlite3")
    sizes = {"m": 40, "k": 24, "n": 32}
    script = DECIDE_IN_ANOTHER_PROCESS.format(einsum=MATMUL, sizes=sizes)
    env = {**os.environ, "OPTSERVE_TUNING__STORE_URL": store_url}
    decided = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert decided.returncode == 0, decided.stderr[-2000:]
    first = schemas.ScheduleResponse.model_validate_json(decided.stdout.strip().splitlines()[-1])
    assert not first.cached and first.evaluations > 0

    again = schedule(_request(sizes), Settings(tuning=TuningSettings(store_url=store_url)))
    assert again.cached and again.evaluations == 0
    assert (again.schedule, again.actions, again.gflops) == (first.schedule, first.actions, first.gflops)


def test_a_decision_outlives_the_replica_s_memory(tmp_path):
    settings = Settings(tuning=TuningSettings(store_url=str(tmp_path / "tuning.sqlite3")))
    sizes = {"m": 24, "k": 40, "n": 32}
    first = schedule(_request(sizes), settings)
    assert not first.cached and first.evaluations > 0
    shared_decision_cache().clear()  # as a restarted replica's memory
    again = schedule(_request(sizes), settings)
    assert again.cached and again.evaluations == 0 and again.schedule == first.schedule
    with open_store(settings.tuning.store_url, read_only=True) as store:
        assert store.stats().schedule_decisions == 1


def test_the_store_is_opened_once_per_process_and_a_profile_leaves_the_memory_alone(tmp_path):
    tuning = TuningSettings(store_url=str(tmp_path / "tuning.sqlite3"))
    assert decision_cache(tuning) is decision_cache(tuning)
    assert decision_cache(tuning) is not shared_decision_cache()
    profile = tmp_path / "profile.json"
    profile.write_text('{"format": "optserve-tuning-profile", "version": 1, "entries": []}')
    assert decision_cache(TuningSettings(profile=profile)) is shared_decision_cache()
