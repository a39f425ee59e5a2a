"""The test service's constants and builders: its settings (small limits, a token, the test ports), the tiny
stand-in model, slow inputs, and its replicas' processes and metrics. The fixtures that start it live in the
tests' conftest.py files; the reliability benchmarks start it with the same settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from optserve.config import Settings
from optserve.corpus import slow_inputs
from optserve.testing import TEST_DATA

DATA = TEST_DATA / "serve"
TOKEN = "test-token-7f3a"
# Ray Serve's proxies share ports (SO_REUSEPORT): on a machine where others run this suite too, give each run
# its own ports (OPTSERVE_TEST_HTTP_PORT / OPTSERVE_TEST_GRPC_PORT), or calls may reach another run's service.
HTTP_PORT = int(os.environ.get("OPTSERVE_TEST_HTTP_PORT", "18000"))
GRPC_PORT = int(os.environ.get("OPTSERVE_TEST_GRPC_PORT", "19000"))
# Small limits, so overload and size errors are cheap to provoke.
MAX_IR_BYTES = 1536 * 1024
MAX_QUEUED = 4
MAX_ONGOING = 6


def build_tiny_model(directory: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "optserve.passlm.tiny_model", str(directory)], check=True, capture_output=True
    )
    return directory


def service_settings(model_dir: Path, **serve_fields) -> Settings:
    return Settings.model_validate(
        {
            "compiler": {"workers": 2, "max_ir_bytes": MAX_IR_BYTES},
            # model candidates alone: the tests count and compare them (the coreset's beside them: flow tests)
            "engine": {
                "model_dir": str(model_dir),
                "backend": "torch",
                "max_samples": 20,
                "coreset_lists_with_model": 0,
            },  # fmt: skip
            "serve": {
                "http_port": HTTP_PORT,
                "grpc_port": GRPC_PORT,
                "auth_token": TOKEN,
                # Logical CPUs of the test Ray: the app (3: a compiler replica reserves one per worker), one
                # more compiler replica the autoscaler may add (2), and a second app some tests run (2).
                "ray_num_cpus": 8,
                "max_queued_requests": MAX_QUEUED,
                "max_ongoing_requests": MAX_ONGOING,
                "default_deadline_s": 60.0,
                # One ingress replica (the default is 2): the tests read one replica's result cache and
                # counts; tests/reliability runs two, tests/serve/test_serve_sockets.py the default.
                "ingress_replicas": 1,
            }
            | serve_fields,
        }
    )


def slow_module() -> str:
    """A valid module just under the size limit that -Oz needs about two seconds for."""
    module = slow_inputs.slow_module()
    assert len(module) < MAX_IR_BYTES
    return module


def slow_candidates_module(loops: int = 600) -> str:
    """One function whose candidates compile for seconds each (`corpus.slow_inputs.slow_candidates_module`),
    under the size limit."""
    module = slow_inputs.slow_candidates_module(loops)
    assert len(module) < MAX_IR_BYTES
    return module


def replica_pids(deployment: str) -> list[int]:
    """Live replica processes of `deployment`, from the process table: Ray names an actor's process
    `ray::ServeReplica:<app>:<deployment>`, and this test session's Ray runs below this process."""
    import psutil

    from optserve.serve.app import APP_NAME

    title = f"ServeReplica:{APP_NAME}:{deployment}"

    def titled(process) -> bool:
        try:
            return process.status() != psutil.STATUS_ZOMBIE and title in " ".join(process.cmdline())
        except psutil.Error:
            return False

    # Forked compiler workers inherit the replica's process title: keep the topmost titled processes.
    return [p.pid for p in psutil.Process().children(recursive=True) if titled(p) and not titled(p.parent())]


def metric(http, sample: str, **labels: str) -> float:
    """A sample's value at `/metrics` (0 when absent)."""
    from optserve.serve.observability.metrics import parse_exposition

    for name, found, value in parse_exposition(http.get("/metrics").text):
        if name == sample and all(found.get(k) == v for k, v in labels.items()):
            return value
    return 0.0


METRICS_SETTLE_S = 5.0  # more than twice the service's metrics report interval (2 s, serve/server.py)


def settled_metric(http, sample: str, **labels: str) -> float:
    """The sample's value once every earlier request is in it (unchanged over METRICS_SETTLE_S)."""
    import time

    value = metric(http, sample, **labels)
    while True:
        time.sleep(METRICS_SETTLE_S)  # replicas report periodically: wait a report out
        latest = metric(http, sample, **labels)
        if latest == value:
            return value
        value = latest


def wait_for_metric(http, sample: str, expected: float, timeout_s: float = 60.0, **labels: str) -> float:
    """Poll `/metrics` until the sample reaches `expected` (returns the last value seen)."""
    import time

    deadline = time.monotonic() + timeout_s
    value = metric(http, sample, **labels)
    while value < expected and time.monotonic() < deadline:
        time.sleep(0.5)  # polling the periodic report, bounded by the deadline
        value = metric(http, sample, **labels)
    return value
