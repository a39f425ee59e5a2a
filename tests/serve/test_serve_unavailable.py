"""A service whose model directory is missing still starts and says why it cannot optimize: UNAVAILABLE over
gRPC, 503 over HTTP, NOT_SERVING in health, while LoopTune keeps working. Runs as a second application in
the session's Ray Serve instance (gRPC callers name it with the `application` metadata key), with two
ingress replicas, so its metrics test reads counts from both (issue 21).
"""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest
import ray

from optserve.clients.python.client import CallError, OptserveClient, RetryPolicy
from optserve.testing.service import TOKEN, service_settings, settled_metric, wait_for_metric

APP = "nomodel"


@pytest.fixture(scope="module")
def modelless(service, tmp_path_factory):
    from ray import serve

    from optserve.serve.app import build_app

    endpoints, _ = service
    missing = tmp_path_factory.mktemp("models") / "passformer"
    settings = service_settings(missing, ingress_replicas=2)
    settings = settings.model_copy(update={"compiler": settings.compiler.model_copy(update={"workers": 1})})
    serve.run(build_app(settings), name=APP, route_prefix=f"/{APP}")
    yield endpoints, missing
    serve.delete(APP)


def test_optimize_without_a_model_is_unavailable_and_names_the_directory(modelless, add_ir):
    endpoints, missing = modelless
    with OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP) as client:
        with pytest.raises(CallError) as caught:
            client.optimize(add_ir)
        assert caught.value.code is grpc.StatusCode.UNAVAILABLE
        assert str(missing) in caught.value.message
        assert client.health("optserve.v1.PassOrdering") == "NOT_SERVING"
        assert client.health("optserve.v1.LoopTune") == "SERVING"
        assert not client.model_metadata().ready


def test_http_readiness_and_optimize_without_a_model_are_503(modelless, add_ir):
    endpoints, missing = modelless
    headers = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=f"{endpoints.http_url}/{APP}", headers=headers, timeout=60) as http:
        ready = http.get("/v2/health/ready")
        assert ready.status_code == 503 and str(missing) in ready.json()["parts"]["model"]
        response = http.post("/v1/optimize", json={"ir": add_ir})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "UNAVAILABLE"
        assert http.get("/v2/health/live").status_code == 200


def test_the_client_retries_unavailable_and_the_service_counts_each_try(modelless, add_ir):
    """The default client tries three times in all (clients/python/channel.py), one without retries once."""
    endpoints, _ = modelless
    headers = {"authorization": f"Bearer {TOKEN}"}
    labels = {"code": "UNAVAILABLE", "operation": "optimize", "protocol": "grpc"}

    with httpx.Client(base_url=f"{endpoints.http_url}/{APP}", headers=headers, timeout=60) as http:
        before = settled_metric(http, "optserve_requests_total", **labels)
        for retry, tries in ((RetryPolicy(), 3), (None, 1)):
            with (
                OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP, retry=retry) as client,
                pytest.raises(CallError) as caught,
            ):
                client.optimize(add_ir)
            assert caught.value.code is grpc.StatusCode.UNAVAILABLE
            counted = wait_for_metric(http, "optserve_requests_total", before + tries, **labels)
            assert counted == before + tries
            before += tries


def _replicas_that_counted(labels: dict[str, str]) -> set[str]:
    """The ingress replicas of APP with a `labels` request count in the nodes' raw Ray metrics (before the
    service sums them)."""
    from optserve.serve.observability.metrics import parse_exposition

    urls = [
        f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        for node in ray.nodes()
        if node.get("Alive") and node.get("MetricsExportPort")
    ]
    wanted = labels | {"application": APP}
    found = set()
    for url in urls:
        for name, series, value in parse_exposition(httpx.get(url, timeout=10).text):
            counted = name == "ray_optserve_requests_total" and value > 0
            if counted and all(series.get(k) == v for k, v in wanted.items()):
                found.add(series.get("replica", ""))
    return found


def test_one_scrape_sums_the_counts_of_both_ingress_replicas(modelless, add_ir):
    """Each try goes to one of the two ingress replicas, each counts in its own Ray metric; `/metrics` of
    the application sums them: it shows every try, and both replicas have counted some."""
    from optserve.serve.observability.metrics import cluster_metrics, parse_exposition

    endpoints, _ = modelless
    labels = {"code": "UNAVAILABLE", "operation": "optimize", "protocol": "http"}
    headers = {"authorization": f"Bearer {TOKEN}"}
    tries = 12  # both replicas get some unless the router sent all 12 to one (p ~ 2**-11)
    with httpx.Client(base_url=f"{endpoints.http_url}/{APP}", headers=headers, timeout=60) as http:
        before = settled_metric(http, "optserve_requests_total", **labels)
        for _ in range(tries):
            assert http.post("/v1/optimize", json={"ir": add_ir}).status_code == 503
        assert wait_for_metric(http, "optserve_requests_total", before + tries, **labels) == before + tries
    assert len(_replicas_that_counted(labels)) == 2
    summed = asyncio.run(cluster_metrics(APP))
    counted = [v for n, s, v in parse_exposition(summed) if n == "optserve_requests_total" and s == labels]
    assert counted == [before + tries]


def test_unavailable_answers_say_when_to_try_again(modelless, add_ir):
    """Every 503 carries Retry-After, and gRPC's UNAVAILABLE `grpc-retry-pushback-ms` (serve/errors.py's
    RETRY_AFTER_S): a caller backs off as the service asks instead of guessing."""
    from optserve.serve.errors import RETRY_AFTER_S
    from optserve.v1 import optserve_pb2 as pb
    from optserve.v1 import optserve_pb2_grpc as pb_grpc

    endpoints, _ = modelless
    headers = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=f"{endpoints.http_url}/{APP}", headers=headers, timeout=60) as http:
        name = http.get("/v1/model").json()["name"]
        for response in (
            http.get("/v2/health/ready"),
            http.post("/v1/optimize", json={"ir": add_ir}),
            http.get(f"/v2/models/{name}/ready"),
        ):
            assert response.status_code == 503, response.text
            assert response.headers.get("retry-after") == str(RETRY_AFTER_S), response.request.url
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        metadata = (("authorization", f"Bearer {TOKEN}"), ("application", APP))
        with pytest.raises(grpc.RpcError) as caught:
            pb_grpc.PassOrderingStub(channel).Optimize(
                pb.OptimizeRequest(ir_text=add_ir), metadata=metadata, timeout=60
            )
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    assert ("grpc-retry-pushback-ms", str(RETRY_AFTER_S * 1000)) in caught.value.trailing_metadata()
