"""The HTTP/JSON API of the running service: the same operations as gRPC, KServe-v2-style health and model
metadata, Prometheus metrics, OpenAPI, and errors as JSON bodies with the matching HTTP status.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import llvmlite.binding as llvm
import pytest

from optserve.compiler.pipeline import evaluate
from optserve.testing.service import MAX_IR_BYTES, TOKEN, settled_metric, slow_module, wait_for_metric

MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()["error"]
    return response.status_code, body["code"], body["message"]


def test_optimize_answers_with_ranked_candidates(http, sum_ir):
    response = http.post("/v1/optimize", json={"ir": sum_ir, "bypass_cache": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["oz_cost"] == evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    assert body["best"] == body["candidates"][0] and body["best"]["cost"] <= body["oz_cost"]
    assert "oz" in [c["source"] for c in body["candidates"]]
    assert body["model_id"] == "passformer-tiny-random"
    assert "optimized_ir" not in body and "object_code" not in body  # only when asked for


def test_optimize_takes_base64_bitcode_and_returns_a_base64_object(http, sum_ir):
    bitcode = base64.b64encode(llvm.parse_assembly(sum_ir).as_bitcode()).decode()
    response = http.post("/v1/optimize", json={"ir_bitcode": bitcode, "return_object": True})
    assert response.status_code == 200, response.text
    assert base64.b64decode(response.json()["object_code"]).startswith(b"\x7fELF")


def test_the_same_request_over_http_and_grpc_gets_the_same_answer(http, client, add_ir):
    over_http = http.post("/v1/optimize", json={"ir": add_ir, "strategy": "priority", "samples": 2}).json()
    over_grpc = client.optimize(add_ir, strategy="priority", samples=2)
    assert [c["pipeline"] for c in over_http["candidates"]] == [c.pipeline for c in over_grpc.candidates]
    assert over_http["ir_sha256"] == over_grpc.ir_sha256


def test_schedule_answers(http):
    response = http.post(
        "/v1/schedule",
        json={"einsum": MATMUL, "sizes": {"m": 32, "k": 32, "n": 32}, "method": "base", "time_limit_s": 2},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["measured"] and body["gflops"] > 0
    assert [loop["index"] for loop in body["loops"]] == ["m", "k", "n"]  # base: the nest as given


def test_schedule_threads_are_checked(http):
    sizes = {"m": 32, "k": 32, "n": 32}
    refused = http.post("/v1/schedule", json={"einsum": MATMUL, "sizes": sizes, "threads": 0})
    assert refused.status_code == 400 and "threads" in refused.text, refused.text
    too_many = http.post("/v1/schedule", json={"einsum": MATMUL, "sizes": sizes, "threads": 100_000})
    assert too_many.status_code == 400 and "threads must be in 1.." in too_many.text, too_many.text
    one = http.post("/v1/schedule", json={"einsum": MATMUL, "sizes": sizes, "method": "base", "threads": 1})
    assert one.status_code == 200 and one.json()["threads"] == 1, one.text


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"ir": "not IR"}, "does not parse"),
        ({}, "exactly one of"),
        ({"ir": "x", "ir_bitcode": "eA=="}, "exactly one of"),
        ({"ir": "x", "strategy": "beam"}, "strategy"),
        ({"ir": "x", "samples": 0}, "samples"),
        ({"ir": "x", "colour": "blue"}, "colour"),
        ({"ir": "x", "baseline_cost": 0}, "baseline_cost: Input should be greater than 0"),
        ({"ir": "x", "baseline_cost": -5}, "baseline_cost: Input should be greater than 0"),
        ({"ir": "x", "baseline_cost": "420"}, "baseline_cost: Input should be a valid integer"),
        ({"ir": "x", "baseline_cost": 2**31}, "baseline_cost: Input should be less than or equal to"),
        ({"ir": "x", "baseline_cost": None}, "leave the field out for -Oz as the baseline"),
    ],
)
def test_bad_optimize_bodies_are_400_with_a_json_error(http, body, complaint):
    status, code, message = error_of(http.post("/v1/optimize", json=body))
    assert (status, code) == (400, "INVALID_ARGUMENT")
    assert complaint in message


def test_malformed_json_is_400(http):
    response = http.post("/v1/optimize", content=b"{not json", headers={"content-type": "application/json"})
    assert error_of(response)[:2] == (400, "INVALID_ARGUMENT")


def test_a_bad_loop_nest_is_400(http):
    response = http.post("/v1/schedule", json={"einsum": MATMUL, "sizes": {"m": 8}})
    status, code, message = error_of(response)
    assert (status, code) == (400, "INVALID_ARGUMENT") and "no size given" in message


def test_an_unsupported_contraction_is_400(http):
    body = {"einsum": "O[x+r] += I[x] * W[r]", "sizes": {"x": 8, "r": 3}}
    status, code, message = error_of(http.post("/v1/schedule", json=body))
    assert (status, code) == (400, "INVALID_ARGUMENT") and "single indices" in message


def test_a_body_over_the_limit_is_413(http):
    response = http.post("/v1/optimize", json={"ir": "; " + "x" * (3 * MAX_IR_BYTES)})
    assert error_of(response)[:2] == (413, "RESOURCE_EXHAUSTED")


def _chunked_post(url: str, path: str, megabytes: int) -> tuple[bytes, int]:
    """POST a chunked body of `megabytes` MiB (no Content-Length) over a raw socket, stopping as soon as an
    answer arrives: (the answer's head, the bytes sent by then)."""
    import select
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    chunk = b"a" * 2**20
    with socket.create_connection((where.hostname, where.port), timeout=60) as sock:
        head = f"POST {path} HTTP/1.1\r\nhost: {where.hostname}\r\ncontent-type: application/json\r\n"
        head += f"authorization: Bearer {TOKEN}\r\ntransfer-encoding: chunked\r\n\r\n"
        sock.sendall(head.encode() + b'8\r\n{"ir": "\r\n')
        sent = 0
        try:
            while sent < megabytes * 2**20 and not select.select([sock], [], [], 0)[0]:
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
            if sent == megabytes * 2**20:  # no answer yet: end the body
                sock.sendall(b'2\r\n"}\r\n0\r\n\r\n')
        except OSError:  # the service closed the connection after its answer
            pass
        answer = b""
        while b"\r\n\r\n" not in answer and (data := sock.recv(65536)):
            answer += data
    return answer, sent


def test_a_chunked_body_over_the_limit_is_413_while_it_is_sent(service, http, add_ir):
    """No Content-Length to refuse it by: the limit is counted while the body is read, so 413 comes long
    before the client has sent all of it (the ingress does not hold 256 MiB), and the service serves on."""
    endpoints, _ = service
    answer, sent = _chunked_post(endpoints.http_url, "/v1/optimize", megabytes=256)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert sent < 64 * 2**20, f"answered only after {sent / 2**20:.0f} MiB"
    assert http.post("/v1/optimize", json={"ir": add_ir}).status_code == 200


def test_oz_not_finishing_before_the_deadline_is_504(http):
    response = http.post("/v1/optimize", json={"ir": slow_module(), "deadline_s": 0.01, "bypass_cache": True})
    assert error_of(response)[:2] == (504, "DEADLINE_EXCEEDED")


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer nope"}])
def test_calls_without_the_token_are_401(service, headers, add_ir):
    endpoints, _ = service
    with httpx.Client(base_url=endpoints.http_url, headers=headers) as stranger:
        for response in (
            stranger.post("/v1/optimize", json={"ir": add_ir}),
            stranger.post("/v1/schedule", json={"einsum": MATMUL, "sizes": {"m": 8, "k": 8, "n": 8}}),
            stranger.get("/v1/model"),
            stranger.get("/metrics"),
        ):
            assert error_of(response)[:2] == (401, "UNAUTHENTICATED")
        assert stranger.get("/v2/health/live").status_code == 200  # probes need no token
        assert stranger.get("/v2/health/ready").status_code == 200


def test_overload_is_429_at_once(service):
    endpoints, _ = service
    started = time.monotonic()

    def schedule(http_client):
        body = {
            "einsum": MATMUL,
            "sizes": {"m": 64, "k": 64, "n": 64},
            "method": "greedy2",
            "time_limit_s": 1,
        }
        response = http_client.post("/v1/schedule", json=body)
        return response.status_code, time.monotonic() - started

    with (
        httpx.Client(
            base_url=endpoints.http_url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=120
        ) as c,
        ThreadPoolExecutor(16) as pool,
    ):
        results = list(pool.map(lambda _: schedule(c), range(16)))
    statuses = [status for status, _ in results]
    assert 200 in statuses and 429 in statuses, statuses
    assert set(statuses) <= {200, 429}
    assert min(t for status, t in results if status == 429) < 1.0


def test_liveness_readiness_and_server_metadata(http):
    assert http.get("/v2/health/live").json() == {"live": True}
    ready = http.get("/v2/health/ready")
    assert ready.status_code == 200
    assert ready.json() == {
        "ready": True,
        "parts": {"model": "ready", "compiler": "ready", "looptune": "ready"},
    }
    assert http.get("/v2").json()["name"] == "optserve"
    assert http.get("/-/healthz").status_code == 200  # Ray Serve's own proxy health


def test_model_metadata_in_kserve_and_optserve_form(http):
    ours = http.get("/v1/model").json()
    kserve = http.get(f"/v2/models/{ours['name']}").json()
    assert kserve["name"] == ours["name"] == "passformer-tiny-random"
    assert kserve["versions"] == [ours["version"]] and kserve["ready"]
    assert http.get(f"/v2/models/{ours['name']}/ready").status_code == 200
    missing = http.get("/v2/models/no-such-model")
    assert error_of(missing)[:2] == (404, "NOT_FOUND")


def test_metrics_count_requests_by_operation_and_code(http, add_ir):
    http.post("/v1/optimize", json={"ir": "not IR"})
    http.post("/v1/optimize", json={"ir": add_ir})
    invalid = {"code": "INVALID_ARGUMENT", "operation": "optimize", "protocol": "http"}
    assert wait_for_metric(http, "optserve_requests_total", 1, **invalid) >= 1
    ok = {"code": "OK", "operation": "optimize", "protocol": "http"}
    assert wait_for_metric(http, "optserve_requests_total", 1, **ok) >= 1
    assert wait_for_metric(http, "optserve_request_seconds_count", 2, operation="optimize") >= 2
    text = http.get("/metrics").text
    assert "optserve_request_seconds_bucket" in text and "optserve_result_cache_lookups_total" in text


def test_one_scrape_sees_the_other_deployments_replicas(http, sum_ir):
    """The compiler and engine count in their own replicas; the ingress's `/metrics` shows their counts."""
    before = settled_metric(http, "optserve_compiler_evaluations_total", outcome="ok")
    tokens = settled_metric(http, "optserve_engine_tokens_total")
    answer = http.post("/v1/optimize", json={"ir": sum_ir, "bypass_cache": True, "strategy": "priority"})
    assert answer.status_code == 200, answer.text
    compiled = len(answer.json()["candidates"]) + 1  # the candidates, -Oz among them, and the input itself
    assert wait_for_metric(http, "optserve_compiler_evaluations_total", before + compiled, outcome="ok") >= (
        before + compiled
    )
    assert wait_for_metric(http, "optserve_engine_tokens_total", tokens + 1) > tokens
    assert wait_for_metric(http, "optserve_engine_generations_total", 1, outcome="ok") >= 1
    # the engine's queue: a gauge of calls held by the engine replicas, empty once the answer is in
    pending = [
        line for line in http.get("/metrics").text.splitlines() if line.startswith("optserve_engine_pending")
    ]
    assert pending == ["optserve_engine_pending 0.0"], pending


def test_a_client_baseline_spares_the_compilers_the_input(http, sum_ir):
    """Counted by the compiler replicas: with the client's own baseline -Oz and the candidates compile,
    each once (a model list equal to -Oz is not compiled again), and not the input."""
    compiled, answers = {}, {}
    for told in (False, True):
        before = settled_metric(http, "optserve_compiler_evaluations_total", outcome="ok")
        body = {"ir": sum_ir, "bypass_cache": True, "strategy": "priority", "samples": 2}
        answer = http.post("/v1/optimize", json=body | ({"baseline_cost": 1} if told else {}))
        assert answer.status_code == 200, answer.text
        answers[told] = answer.json()
        compiled[told] = settled_metric(http, "optserve_compiler_evaluations_total", outcome="ok") - before
        assert not answers[told]["oz_skipped"] and answers[told]["oz_cost"] > 0
    models = {
        told: [c["passes"] for c in answers[told]["candidates"] if c["source"] == "model"] for told in answers
    }
    assert len(models[True]) >= 1 and ["-Oz"] not in models[True]
    assert compiled[True] == len(models[True]) + 1  # the model's candidates and -Oz
    assert compiled[False] == len(models[False]) + 2  # and the input without the client's baseline
    assert models[True] == models[False]
    assert answers[True]["oz_cost"] == answers[False]["oz_cost"]


def test_metric_labels_never_carry_a_raw_path(http):
    """Requests refused before routing (a body over the limit) count under a bounded operation name."""
    refused = http.post("/v1/nonexistent/" + "x" * 50, content=b"x" * (4 * MAX_IR_BYTES))
    assert refused.status_code == 413
    too_large = {"operation": "other", "code": "RESOURCE_EXHAUSTED"}
    assert wait_for_metric(http, "optserve_requests_total", 1, **too_large) >= 1
    assert "nonexistent" not in http.get("/metrics").text


def test_openapi_describes_the_operations(http):
    schema = http.get("/openapi.json").json()
    assert {"/v1/optimize", "/v1/schedule", "/v1/model", "/v2/health/ready", "/metrics"} <= set(
        schema["paths"]
    )
    assert "OptimizeRequest" in schema["components"]["schemas"]
    assert "429" in schema["paths"]["/v1/optimize"]["post"]["responses"]
