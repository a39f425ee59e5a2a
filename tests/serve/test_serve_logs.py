"""Logs of the running service: each answered request writes one JSON access line with its request id (the
caller's, or one Ray Serve makes up), which reaches the terminal of the process that started the service;
the response carries the same id (HTTP header `x-request-id`, gRPC trailing metadata `request_id`)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from optserve.serve.app import APP_NAME
from optserve.testing.service import TOKEN
from optserve.v1 import optserve_pb2 as pb
from optserve.v1 import optserve_pb2_grpc as pb_grpc

ACCESS_WAIT_S = 60.0  # Ray forwards replica output to the driver within seconds


def _access_lines(capfd, request_id: str) -> list[dict]:
    """The JSON access lines with `request_id` printed so far (Ray prefixes each with the replica's name)."""
    found = []
    deadline = time.monotonic() + ACCESS_WAIT_S
    seen = ""
    while time.monotonic() < deadline and not found:
        captured = capfd.readouterr()
        seen += captured.out + captured.err
        for line in seen.splitlines():
            start = line.find("{")
            if start < 0 or request_id not in line:
                continue
            entry = json.loads(line[start:])
            if entry.get("logger") == "optserve.access" and entry.get("request_id") == request_id:
                found.append(entry)
        time.sleep(0.5)  # polling the captured output, bounded by the deadline
    return found


def test_an_http_request_id_is_returned_and_logged_as_json(http, add_ir, capfd):
    request_id = f"test-{uuid.uuid4()}"
    answer = http.post("/v1/optimize", json={"ir": add_ir}, headers={"x-request-id": request_id})
    assert answer.status_code == 200 and answer.headers["x-request-id"] == request_id
    (entry,) = _access_lines(capfd, request_id)
    assert entry["operation"] == "optimize" and entry["protocol"] == "http" and entry["code"] == "OK"
    assert (
        entry["strategy"] == "greedy" and entry["samples"] == 1 and entry["objective"] == "instruction_count"
    )
    assert isinstance(entry["cached"], bool) and entry["latency_ms"] > 0 and entry["level"] == "INFO"


def test_a_grpc_request_id_is_returned_and_an_error_is_logged_with_its_message(service, capfd):
    import grpc

    endpoints, _ = service
    request_id = f"test-{uuid.uuid4()}"
    metadata = (("authorization", f"Bearer {TOKEN}"), ("application", APP_NAME), ("request_id", request_id))
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        stub = pb_grpc.PassOrderingStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Optimize.with_call(pb.OptimizeRequest(ir_text="not IR"), metadata=metadata, timeout=60)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert dict(caught.value.trailing_metadata())["request_id"] == request_id
    (entry,) = _access_lines(capfd, request_id)
    assert entry["protocol"] == "grpc" and entry["code"] == "INVALID_ARGUMENT" and entry["error"]


def test_a_request_without_an_id_gets_one(http):
    answer = http.get("/v1/model")
    assert answer.status_code == 200 and len(answer.headers["x-request-id"]) >= 16
