"""optcc's service call tries again what a replica's restart answers: UNAVAILABLE, and the INTERNAL that Ray
Serve's proxy gives a call whose replica died with it (a killed ingress replica); any other INTERNAL is
answered at once (clang's object then). A stand-in gRPC service answers the first try with the error and
the second with an answer."""

from __future__ import annotations

import grpc
import pytest

from optserve.clients import service_call
from optserve.clients.python.requests import REPLICA_DIED, CallError
from optserve.v1 import optserve_pb2 as pb
from tests.clients.clients_helpers import fake_optimize_service

DIED = f"{REPLICA_DIED}\n\tclass_name: ServeReplica:optserve:Ingress\n\tpid: 4242"


def _first_try_fails(code: grpc.StatusCode, details: str):
    tries: list[int] = []

    def optimize(request, context):
        tries.append(1)
        if len(tries) == 1:
            context.abort(code, details)
        return pb.OptimizeResponse(model_id="answered on a later try")

    return tries, optimize


@pytest.mark.parametrize(
    "code, details",
    [(grpc.StatusCode.UNAVAILABLE, "a backend is unavailable"), (grpc.StatusCode.INTERNAL, DIED)],
    ids=["unavailable", "replica died with the call"],
)
def test_a_restarting_replicas_answer_is_tried_again(code, details):
    tries, optimize = _first_try_fails(code, details)
    with fake_optimize_service(optimize) as target:
        answer = service_call.optimize(target, b"BC\xc0\xde", deadline_s=5.0)
    assert answer.model_id == "answered on a later try" and len(tries) == 2


def test_another_internal_error_is_not_tried_again():
    tries, optimize = _first_try_fails(grpc.StatusCode.INTERNAL, "-Oz failed to compile this module")
    with fake_optimize_service(optimize) as target, pytest.raises(CallError) as failed:
        service_call.optimize(target, b"BC\xc0\xde", deadline_s=5.0)
    assert failed.value.code is grpc.StatusCode.INTERNAL and len(tries) == 1
