"""The service with the vLLM backend (CPU build): started as a second application in the session's Ray
Serve instance, it answers Optimize like the torch-backed service does for the same model and request."""

from __future__ import annotations

import pytest
from serve_helpers import TOKEN, service_settings

from optserve.serve.client import OptserveClient
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
