"""The gRPC codec (serve/edges/codec.py): proto messages to the request schema and back, proto zeros as the
documented defaults, raw bitcode, and malformed requests refused as INVALID_ARGUMENT."""

from __future__ import annotations

import grpc
import pytest

from optserve.serve import schemas
from optserve.serve.edges import codec
from optserve.serve.errors import ServiceError
from optserve.v1 import optserve_pb2 as pb
from tests.serve.flow_helpers import ScriptedGenerator, optimize, with_coreset


def test_proto_zeros_mean_the_documented_defaults():
    request = codec.optimize_request(pb.OptimizeRequest(ir_text="x"))
    assert (request.ir, request.strategy, request.objective, request.samples) == (
        "x",
        "greedy",
        "instruction_count",
        1,
    )
    assert request.deadline_s is None and request.temperature == 1.0


def test_the_coreset_strategy_and_source_cross_the_grpc_edge(pool, unrolled_loop_ir, tmp_path):
    request = codec.optimize_request(pb.OptimizeRequest(ir_text="x", strategy=pb.CORESET, samples=3))
    assert (request.strategy, request.samples) == ("coreset", 3)
    settings = with_coreset(tmp_path, [("sroa",)])
    response = optimize(
        ScriptedGenerator([]), pool, request.model_copy(update={"ir": unrolled_loop_ir}), settings=settings
    )
    message = codec.optimize_response(response)
    assert message.best.source == pb.CORESET_LIST and list(message.best.passes) == ["sroa"]


def test_bitcode_arrives_raw_over_grpc():
    request = codec.optimize_request(
        pb.OptimizeRequest(ir_bitcode=b"BC\xc0\xde\x01", strategy=pb.PRIORITY, samples=4)
    )
    assert request.ir is None and request.module_bytes == b"BC\xc0\xde\x01" and request.samples == 4


@pytest.mark.parametrize(
    "message",
    [
        pb.OptimizeRequest(),
        pb.OptimizeRequest(ir_text="x", deadline_s=-1),
        pb.OptimizeRequest(ir_text="x", top_p=2),
        pb.OptimizeRequest(ir_text="x", baseline_cost=0),
        pb.OptimizeRequest(ir_text="x", baseline_cost=-5),
    ],
)
def test_malformed_grpc_requests_are_invalid_argument(message):
    with pytest.raises(ServiceError) as caught:
        codec.optimize_request(message)
    assert caught.value.kind.grpc_code is grpc.StatusCode.INVALID_ARGUMENT


def test_skip_input_cost_crosses_the_grpc_edge():
    assert not codec.optimize_request(pb.OptimizeRequest(ir_text="x")).skip_input_cost
    assert codec.optimize_request(pb.OptimizeRequest(ir_text="x", skip_input_cost=True)).skip_input_cost


def test_a_client_baseline_crosses_the_grpc_edge_only_when_set():
    assert codec.optimize_request(pb.OptimizeRequest(ir_text="x")).baseline_cost is None
    assert codec.optimize_request(pb.OptimizeRequest(ir_text="x", baseline_cost=420)).baseline_cost == 420
    response = schemas.OptimizeResponse.model_validate(
        {
            "ir_sha256": "0" * 64,
            "objective": "text_size",
            "input_cost": -1,
            "oz_cost": -1,
            "candidates": [{"pipeline": "", "passes": [], "cost": 420, "source": "client_baseline"}],
            "best": {"pipeline": "", "passes": [], "cost": 420, "source": "client_baseline"},
            "improvement_over_oz_pct": 0.0,
            "timings": {},
            "model_id": "m",
            "model_version": "v",
            "oz_skipped": True,
        }
    )
    message = codec.optimize_response(response)
    assert message.oz_skipped and message.best.source == pb.CLIENT_BASELINE and message.oz_cost == -1
