"""The real service, started once per test session: Ray (local), Ray Serve, the tiny stand-in model on the
torch backend, real compiler workers, real gRPC and HTTP on non-default ports.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from optserve.testing.service import DATA, TOKEN, build_tiny_model, service_settings


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


# Package scope: one pytest process may run several service folders; each folder's service stops (and Ray
# with it) before the next folder's starts with its own settings (docs/structure_audit.md).
@pytest.fixture(scope="package")
def service(tiny_model_dir):
    """Endpoints of the running service (and its settings)."""
    from optserve.serve import server

    settings = service_settings(tiny_model_dir)
    endpoints = server.start(settings)
    yield endpoints, settings
    server.stop()


@pytest.fixture
def client(service):
    from optserve.clients.python.client import OptserveClient
    from optserve.serve.app import APP_NAME

    endpoints, _ = service
    # Name the application: some tests run a second one next to it.
    with OptserveClient(
        endpoints.grpc_target, token=TOKEN, timeout_s=120, application=APP_NAME
    ) as grpc_client:
        yield grpc_client


@pytest.fixture
def http(service):
    endpoints, _ = service
    with httpx.Client(
        base_url=endpoints.http_url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=120
    ) as http_client:
        yield http_client


@pytest.fixture(scope="session")
def add_ir() -> str:
    return (DATA / "add.ll").read_text()


@pytest.fixture(scope="session")
def sum_ir() -> str:
    return (DATA / "sum.ll").read_text()


@pytest.fixture(scope="session")
def unrolled_loop_ir() -> str:
    return (DATA / "unrolled_loop.ll").read_text()


@pytest.fixture(scope="module")
def pool():
    """A real crash-isolated compiler pool, for the Ray-free Optimize flow tests (one per test module)."""
    from optserve.compiler.workers import CompilerPool

    with CompilerPool(processes=2, timeout_s=20) as compiler_pool:
        yield compiler_pool
