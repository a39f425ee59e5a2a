"""A service instance of its own for the reliability tests (the serve tests' ports + 20000, and gRPC over TLS
on their gRPC port + 20443: 38000 / 39000 / 39443 by default), with TLS on.

The ports are the serve tests' (OPTSERVE_TEST_HTTP_PORT / OPTSERVE_TEST_GRPC_PORT) + 20000, so that a
worktree's own test ports keep its reliability tests from reaching another run's service.

It reuses the serve tests' builders (optserve/testing/service.py): the same tiny stand-in model, small limits
and token; the ports differ, two ingress replicas serve (the default; the serve tests run one), and HTTP is
served over TLS with a self-signed certificate made here, so every HTTP call in this folder also exercises
TLS. The same certificate serves gRPC over TLS on GRPC_TLS_PORT (serve/edges/grpc_tls.py); `grpc_client`
talks plaintext gRPC over loopback, `grpc_tls_client` TLS.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from optserve.testing.service import TOKEN, build_tiny_model, service_settings
from optserve.testing.tls import make_self_signed_cert

HTTP_PORT = int(os.environ.get("OPTSERVE_TEST_HTTP_PORT", "18000")) + 20000
GRPC_PORT = int(os.environ.get("OPTSERVE_TEST_GRPC_PORT", "19000")) + 20000
GRPC_TLS_PORT = GRPC_PORT + 443
SERVE_DATA = Path(__file__).resolve().parent.parent / "data" / "serve"


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory) -> tuple[Path, Path]:
    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


# Package scope: one pytest process may run several service folders; each folder's service stops (and Ray
# with it) before the next folder's starts with its own settings (docs/structure_audit.md).
@pytest.fixture(scope="package")
def rel_service(tmp_path_factory, tls_files):
    """Endpoints and settings of the running service."""
    from optserve.serve import server

    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    cert, key = tls_files
    settings = service_settings(
        model_dir,
        http_port=HTTP_PORT,
        grpc_port=GRPC_PORT,
        grpc_tls_port=GRPC_TLS_PORT,
        tls_certfile=str(cert),
        tls_keyfile=str(key),
        ingress_replicas=2,  # the default: test_reliability_ingress.py kills one
    )
    endpoints = server.start(settings)
    yield endpoints, settings
    server.stop()


@pytest.fixture(scope="package")
def grpc_client(rel_service):
    from optserve.clients.python.client import OptserveClient
    from optserve.serve.app import APP_NAME

    endpoints, _ = rel_service
    with OptserveClient(endpoints.grpc_target, token=TOKEN, timeout_s=120, application=APP_NAME) as client:
        yield client


@pytest.fixture(scope="package")
def grpc_tls_client(rel_service, tls_files):
    from optserve.clients.python.client import OptserveClient

    endpoints, _ = rel_service
    with OptserveClient(
        endpoints.grpc_tls_target, token=TOKEN, timeout_s=120, ca_cert=tls_files[0]
    ) as client:
        yield client


@pytest.fixture(scope="package")
def https(rel_service, tls_files):
    endpoints, _ = rel_service
    with httpx.Client(
        base_url=endpoints.http_url,
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=120,
        verify=str(tls_files[0]),
    ) as client:
        yield client


@pytest.fixture(scope="session")
def add_ir() -> str:
    return (SERVE_DATA / "add.ll").read_text()
