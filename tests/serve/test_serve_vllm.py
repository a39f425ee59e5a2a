"""The service with the vLLM backend (CPU build): started as a second application in the session's Ray
Serve instance, it answers Optimize like the torch-backed service does for the same model and request; and
when its engine's worker process is killed (as the OOM killer would), it says so and recovers by itself."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from optserve.clients.python.client import CallError, OptserveClient
from optserve.serve.edges.grpc_methods import HEALTH_REASON_KEY
from optserve.testing.service import TOKEN, service_settings
from optserve.v1 import optserve_pb2 as pb

APP = "vllm"


@pytest.fixture(scope="module")
def vllm_service(service, tiny_model_dir):
    from ray import serve

    from optserve.serve.app import build_app

    endpoints, _ = service
    settings = service_settings(tiny_model_dir)
    settings = settings.model_copy(
        update={
            "engine": settings.engine.model_copy(update={"backend": "vllm"}),
            "compiler": settings.compiler.model_copy(update={"workers": 1}),
        }
    )
    serve.run(build_app(settings), name=APP, route_prefix=f"/{APP}")
    with OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP, timeout_s=300) as client:
        yield client
    serve.delete(APP)


@pytest.mark.slow
def test_the_vllm_backend_serves_the_same_candidates_as_torch(vllm_service, client, sum_ir):
    metadata = vllm_service.model_metadata()
    assert metadata.ready and metadata.backend == "vllm"
    over_vllm = vllm_service.optimize(sum_ir, strategy="priority", samples=3, bypass_cache=True)
    over_torch = client.optimize(sum_ir, strategy="priority", samples=3, bypass_cache=True)
    assert over_vllm.model_version == over_torch.model_version
    assert over_vllm.best.cost <= over_vllm.oz_cost
    assert [c.source for c in over_vllm.candidates].count(pb.OZ) == 1
    assert [c.pipeline for c in over_vllm.candidates] == [c.pipeline for c in over_torch.candidates]


def _engine_process(title: str) -> psutil.Process:
    """vLLM's process titled `title` (VLLM::EngineCore, or VLLM::Worker under it) under this app's engine
    replica (Ray titles it ServeReplica:<app>:<name>)."""

    def titled(process: psutil.Process, title: str) -> bool:
        try:
            return process.status() != psutil.STATUS_ZOMBIE and title in " ".join(process.cmdline())
        except psutil.Error:
            return False

    replicas = [p for p in psutil.Process().children(recursive=True) if titled(p, f"ServeReplica:{APP}:Pass")]
    found = [w for r in replicas for w in r.children(recursive=True) if titled(w, title)]
    assert len(found) == 1, (replicas, found)
    return found[0]


def _health(channel: grpc.Channel) -> tuple[str, str]:
    """gRPC health of the PassOrdering service and the reason it gives when not serving."""
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service="optserve.v1.PassOrdering")
    response, call = stub.Check.with_call(request, timeout=30, metadata=(("application", APP),))
    reason = dict(call.trailing_metadata() or ()).get(HEALTH_REASON_KEY, "")
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status), reason


def _poll(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)  # polling a condition, bounded by the deadline
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")


def _busy(process: psutil.Process, since: float) -> bool:
    try:
        return process.cpu_times().user - since > 0.1
    except psutil.Error:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["VLLM::Worker", "VLLM::EngineCore"])
def test_a_killed_vllm_process_is_reported_and_replaced(vllm_service, service, sum_ir, add_ir, victim):
    """SIGKILL vLLM's worker, or its engine core, mid-request: that request and those after it get
    UNAVAILABLE (HTTP 503), health and readiness say NOT_SERVING with the reason, Ray Serve replaces the
    replica (check_health), and Optimize works again without anyone restarting the service."""
    endpoints, _ = service
    worker = _engine_process(victim)
    headers = {"authorization": f"Bearer {TOKEN}"}
    with (
        OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP, retry=None) as once,
        httpx.Client(base_url=f"{endpoints.http_url}/{APP}", headers=headers, timeout=60) as http,
        grpc.insecure_channel(endpoints.grpc_target) as channel,
        ThreadPoolExecutor(1) as pool,
    ):
        assert _health(channel) == ("SERVING", "")
        cpu_before = worker.cpu_times().user
        pending = pool.submit(
            once.optimize, sum_ir, strategy="priority", samples=20, bypass_cache=True, deadline_s=60
        )
        _poll(lambda: _busy(worker, cpu_before), 60, "the engine to decode")
        os.kill(worker.pid, signal.SIGKILL)
        killed = time.monotonic()
        try:
            pending.result(timeout=60)  # it may have been answered just before the kill
        except CallError as err:
            assert err.code is grpc.StatusCode.UNAVAILABLE, err
            assert "died" in err.message, err.message

        with pytest.raises(CallError) as during:
            once.optimize(add_ir, bypass_cache=True, deadline_s=30)
        assert during.value.code is grpc.StatusCode.UNAVAILABLE, during.value
        answer = http.post("/v1/optimize", json={"ir": add_ir, "bypass_cache": True})
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "UNAVAILABLE", answer.text
        ready = http.get("/v2/health/ready")
        assert ready.status_code == 503 and ready.json()["parts"]["model"] != "ready", ready.text
        assert ready.json()["parts"]["compiler"] == "ready"
        status, reason = _health(channel)
        assert status == "NOT_SERVING" and reason.startswith("model: "), reason

        def serving_again() -> bool:
            try:
                answer = once.optimize(add_ir, bypass_cache=True, deadline_s=30)
            except CallError as err:
                assert err.code is grpc.StatusCode.UNAVAILABLE, err
                return False
            return answer.best.cost <= answer.oz_cost

        _poll(serving_again, 300, "Optimize to work again")
        recovered_s = time.monotonic() - killed
        assert _health(channel) == ("SERVING", "")
        assert http.get("/v2/health/ready").status_code == 200
        assert _engine_process(victim).pid != worker.pid
        print(f"\n{victim} killed -> Optimize answered again after {recovered_s:.1f} s")
