"""optserve on a local multi-node Ray cluster (ray.cluster_utils.Cluster): engine and compiler replicas are
spread over different nodes (max_replicas_per_node=1) and requests still get correct answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optserve.compiler.pipeline import evaluate
from optserve.testing.service import DATA

SCRIPT = Path(__file__).resolve().parent / "serve_cluster_run.py"
pytestmark = pytest.mark.service  # starts its own Ray cluster and Serve app (serve_cluster_run.py)


@pytest.mark.slow
def test_replicas_on_different_nodes_answer_correctly(tiny_model_dir):
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(tiny_model_dir)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["nodes"] == 2
    for deployment in ("PassOrderingEngine", "CompilerWorkers"):
        nodes = report["replica_nodes"][deployment]
        assert len(nodes) == 2 and len(set(nodes)) == 2, report["replica_nodes"]
    expected = [
        evaluate((DATA / n).read_text(), ("-Oz",), "instruction_count").cost
        for n in ("add.ll", "sum.ll", "unrolled_loop.ll")
    ]
    assert report["oz_costs"] == expected
    assert report["best_not_worse"] and report["schedule_gflops"] > 0
