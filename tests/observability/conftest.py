"""A service instance of its own with traces on, exporting to a real OTLP receiver in the test process
(otlp_receiver.py). Its tuning store is the session's (tests/conftest.py): its lookup is a traced stage.
Ports: the serve tests' (OPTSERVE_TEST_HTTP_PORT / OPTSERVE_TEST_GRPC_PORT) + 30000, so a worktree's own
test ports keep it apart from another run's service.
"""

from __future__ import annotations

import os

import httpx
import pytest

from optserve.testing.service import TOKEN, build_tiny_model, service_settings
from tests.observability.otlp_receiver import OtlpReceiver

HTTP_PORT = int(os.environ.get("OPTSERVE_TEST_HTTP_PORT", "18000")) + 30000
GRPC_PORT = int(os.environ.get("OPTSERVE_TEST_GRPC_PORT", "19000")) + 30000


@pytest.fixture(scope="package")
def receiver():
    otlp = OtlpReceiver()
    yield otlp
    otlp.stop()


# Package scope: each folder's service stops (and Ray with it) before the next folder's starts.
@pytest.fixture(scope="package")
def traced_service(tmp_path_factory, receiver):
    """Endpoints and settings of the running service."""
    from optserve.serve import server

    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    settings = service_settings(model_dir, http_port=HTTP_PORT, grpc_port=GRPC_PORT)
    traces = settings.observability.model_copy(update={"otlp_endpoint": receiver.endpoint})
    settings = settings.model_copy(update={"observability": traces})
    endpoints = server.start(settings)
    yield endpoints, settings
    server.stop()


@pytest.fixture
def http(traced_service):
    endpoints, _ = traced_service
    with httpx.Client(
        base_url=endpoints.http_url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=120
    ) as client:
        yield client
