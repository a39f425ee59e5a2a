"""The bad-input corpus: every kind is sent over real gRPC and over real HTTP (HTTPS here) to the running
service; each gets a clear error (status + a message naming the problem), and after each the service answers
the next valid request correctly.
"""

from __future__ import annotations

import base64
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
import pytest

from optserve.clients.python.client import CallError
from optserve.testing.service import MAX_IR_BYTES, TOKEN
from optserve.v1 import optserve_pb2 as pb
from tests.reliability import reliability_inputs as gen

CORPUS = Path(__file__).resolve().parent.parent / "data" / "reliability"

OK = "OK"


@dataclass(frozen=True)
class IRCase:
    """A module (text or bytes) for Optimize, with the answer expected: OK, or an error and its message."""

    kind: str
    module: object  # str | bytes | callable producing one
    expect: str = "INVALID_ARGUMENT"
    or_else: str = ""  # another code allowed (a busy machine's timeout may come before LLVM's own failure)
    message: str = ""  # regex the error message must match
    options: dict = field(default_factory=dict)

    def data(self) -> str | bytes:
        return self.module() if callable(self.module) else self.module


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text()


def _corpus_bytes(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def _valid_bitcode_truncated() -> bytes:
    from optserve.compiler.ir import parse_module

    code = parse_module((CORPUS.parent / "serve" / "add.ll").read_text()).as_bitcode()
    return code[: len(code) // 2]


IR_CASES = [
    IRCase("empty", "", message="empty IR"),
    IRCase("whitespace_only", " \n\t\n", message="empty IR"),
    IRCase("non_utf8", lambda: _corpus_bytes("non_utf8.ll"), message="neither bitcode nor UTF-8"),
    IRCase("binary_garbage", lambda: _corpus_bytes("garbage.bin"), message="neither bitcode nor UTF-8|parse"),
    IRCase("nul_in_text", "define i32 @f() {\n  ret i32 0\n}\n\0", message="NUL character"),
    IRCase("truncated_ir", lambda: _corpus("truncated.ll"), message=r"does not parse: line \d+"),
    IRCase(
        "unknown_instruction", lambda: _corpus("unknown_instruction.ll"), message="does not parse.*line 3"
    ),
    IRCase("unknown_type", lambda: _corpus("unknown_type.ll"), message="does not parse.*line 3"),
    IRCase("undefined_value", lambda: _corpus("undefined_value.ll"), message="does not parse.*nothere"),
    IRCase("undefined_function", lambda: _corpus("undefined_function_call.ll"), message="does not parse.*@g"),
    IRCase("fails_verifier", lambda: _corpus("fails_verifier.ll"), message="verifier|does not parse"),
    IRCase("no_terminator", lambda: _corpus("no_terminator.ll"), message="does not parse|verifier"),
    IRCase("foreign_target_triple", lambda: _corpus("foreign_triple.ll"), message="hexagon.*not supported"),
    IRCase("bad_bitcode", lambda: _corpus_bytes("bad_bitcode.bc"), message="invalid bitcode"),
    IRCase("truncated_bitcode", _valid_bitcode_truncated, message="invalid bitcode"),
    IRCase(
        "ir_over_size_limit",
        lambda: "; " + "x" * MAX_IR_BYTES + "\n",
        message=f"more than the limit of {MAX_IR_BYTES} bytes",
    ),
    IRCase("deep_type_nesting", lambda: gen.deep_type(50_000), message="levels deep, more than the limit"),
    IRCase(
        "deep_constant_expression",
        lambda: (
            "@g = global i32 0\n@p = global ptr "
            + "getelementptr (i8, ptr " * 30_000
            + "@g"
            + ", i64 1)" * 30_000
            + "\n"
        ),
        message="levels deep",
    ),
    # Pathological but valid: each must be answered (never worse than -Oz), within the deadline.
    IRCase("deep_loop_nesting", lambda: gen.deep_nesting(150), expect=OK, options={"deadline_s": 60}),
    IRCase(
        "huge_switch_thousands_of_blocks",
        lambda: gen.huge_switch(3000),
        expect=OK,
        options={"deadline_s": 60},
    ),
    IRCase("hundreds_of_blocks_chain", lambda: gen.many_blocks(300), expect=OK, options={"deadline_s": 60}),
    # 1500 blocks in a chain: LLVM 20's SimplifyCFG (in -Oz) asserts "Iterative simplification didn't
    # converge!" and aborts. The abort stays in the compiler worker and is the input's fault:
    # INVALID_ARGUMENT with LLVM's words. On a busy machine the candidate timeout may come first: INTERNAL.
    IRCase(
        "thousands_of_blocks_llvm_abort",
        lambda: gen.many_blocks(1500),
        expect="INVALID_ARGUMENT",
        or_else="INTERNAL",
        message=r"LLVM fails on this module at -Oz: .*converge|-Oz failed to compile this module: timed out",
        options={"deadline_s": 60},
    ),
    IRCase("long_use_def_chain", lambda: gen.deep_expression(3000), expect=OK, options={"deadline_s": 60}),
    IRCase("very_long_name", lambda: gen.long_name(100_000), expect=OK, options={"deadline_s": 60}),
    # Options out of range ride on a valid module.
    IRCase("samples_over_limit", None, message="samples", options={"samples": 100_000}),
    IRCase("negative_deadline", None, message="deadline_s", options={"deadline_s": -1}),
    IRCase("feedback_rounds_over_limit", None, message="feedback", options={"feedback_rounds": 1000}),
]


def _module(case: IRCase, add_ir: str):
    return add_ir if case.module is None else case.data()


def _grpc_optimize(client, module, options: dict) -> pb.OptimizeResponse:
    fields = {"ir_bitcode": module} if isinstance(module, bytes) else {"ir_text": module}
    request = pb.OptimizeRequest(bypass_cache=True, **fields, **options)
    return client._call(client._pass_ordering.Optimize, request)


def _http_optimize_body(module, options: dict) -> dict:
    if isinstance(module, bytes):
        fields = {"ir_bitcode": base64.b64encode(module).decode()}
    else:
        fields = {"ir": module}
    return {"bypass_cache": True, **fields, **options}


@pytest.fixture(scope="module")
def reference(grpc_client, add_ir) -> pb.OptimizeResponse:
    """The answer to a valid request, taken once: later answers must equal it."""
    return grpc_client.optimize(add_ir)


def assert_still_serving(grpc_client, https, add_ir, reference) -> None:
    """The next valid request, over both protocols, gets the correct answer."""
    again = grpc_client.optimize(add_ir)
    assert (again.best.cost, again.oz_cost, again.ir_sha256) == (
        reference.best.cost,
        reference.oz_cost,
        reference.ir_sha256,
    )
    answer = https.post("/v1/optimize", json={"ir": add_ir})
    assert answer.status_code == 200, answer.text
    assert answer.json()["best"]["cost"] == reference.best.cost


@pytest.mark.parametrize("case", IR_CASES, ids=lambda c: c.kind)
def test_bad_ir_over_grpc(case, grpc_client, https, add_ir, reference):
    module = _module(case, add_ir)
    if case.expect == OK:
        answer = _grpc_optimize(grpc_client, module, case.options)
        assert answer.best.cost <= answer.oz_cost
    else:
        with pytest.raises(CallError) as caught:
            _grpc_optimize(grpc_client, module, case.options)
        assert caught.value.code.name in (case.expect, case.or_else), caught.value
        assert re.search(case.message, caught.value.message, re.S), caught.value.message
    assert_still_serving(grpc_client, https, add_ir, reference)


@pytest.mark.parametrize("case", IR_CASES, ids=lambda c: c.kind)
def test_bad_ir_over_http(case, grpc_client, https, add_ir, reference):
    module = _module(case, add_ir)
    answer = https.post("/v1/optimize", json=_http_optimize_body(module, case.options))
    if case.expect == OK:
        assert answer.status_code == 200, answer.text
        assert answer.json()["best"]["cost"] <= answer.json()["oz_cost"]
    else:
        error = answer.json()["error"]
        assert error["code"] in (case.expect, case.or_else), answer.text
        assert answer.status_code == (500 if error["code"] == "INTERNAL" else 400), answer.text
        assert re.search(case.message, error["message"], re.S), error["message"]
    assert_still_serving(grpc_client, https, add_ir, reference)


MATMUL = "C[m,n] += A[m,k] * B[k,n]"
# (kind, einsum, sizes, message regex)
NEST_CASES = [
    ("unknown_index", MATMUL, {"m": 8, "k": 8, "n": 8, "q": 8}, r"unknown indices \['q'\]"),
    ("missing_size", MATMUL, {"m": 8, "k": 8}, r"no size given for indices \['n'\]"),
    (
        "output_index_in_no_input",
        "C[m,z] += A[m,k] * B[k,n]",
        {"m": 8, "k": 8, "n": 8},
        r"appear in no input",
    ),
    ("repeated_index", "C[m,n] += A[m,m] * B[k,n]", {"m": 8, "k": 8, "n": 8}, "appears twice"),
    ("three_factors", "C[m,n] += A[m,k] * B[k,n] * D[n]", {"m": 8, "k": 8, "n": 8}, "exactly two"),
    ("no_accumulate", "C[m,n] = A[m,k] * B[k,n]", {"m": 8, "k": 8, "n": 8}, "expected 'OUT"),
    ("same_tensor_names", "A[m,n] += A[m,k] * B[k,n]", {"m": 8, "k": 8, "n": 8}, "distinct"),
    ("bad_index_expression", "C[m,n] += A[m,k-1] * B[k,n]", {"m": 8, "k": 8, "n": 8}, "bad index"),
    ("absurd_size", MATMUL, {"m": 2**40, "k": 8, "n": 8}, r"size of m is \d+, allowed"),
    ("zero_size", MATMUL, {"m": 0, "k": 8, "n": 8}, "size of m is 0"),
    ("negative_size", MATMUL, {"m": -5, "k": 8, "n": 8}, "size of m is -5"),
    (
        "tensor_over_memory_limit",
        "C[b,m,n] += A[b,m,k] * B[b,k,n]",
        {"b": 4, "m": 4096, "k": 4096, "n": 8},
        r"A needs \d+ bytes, limit is",
    ),
    ("too_many_loops", "C[a,b,c,d,e,f] += A[a,b,c,d,e,f,g,h,i,j,k] * B[k,j,i]", None, "loops allowed"),
    (
        "contraction_too_long",
        "C[m,n] += A[m,k] * B[k,n]" + " " * 2000,
        {"m": 8, "k": 8, "n": 8},
        "longer than",
    ),
    ("empty_einsum", "", {}, "expected 'OUT"),
]


def _nest_sizes(einsum: str, sizes):
    if sizes is not None:
        return sizes
    return {index: 2 for index in "abcdefghijk"}


@pytest.mark.parametrize("kind,einsum,sizes,message", NEST_CASES, ids=[c[0] for c in NEST_CASES])
def test_bad_loop_nest_over_both(kind, einsum, sizes, message, grpc_client, https, add_ir, reference):
    sizes = _nest_sizes(einsum, sizes)
    # The proto's sizes are uint32: a size it cannot carry is sent as the nearest value it can.
    grpc_sizes = {name: min(max(size, 0), 2**32 - 1) for name, size in sizes.items()}
    grpc_message = message if grpc_sizes == sizes else r"size of m is (0|\d+), allowed"
    with pytest.raises(CallError) as caught:
        grpc_client.schedule(einsum, grpc_sizes, measure=False)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert re.search(grpc_message, caught.value.message), caught.value.message
    answer = https.post("/v1/schedule", json={"einsum": einsum, "sizes": sizes, "measure": False})
    assert answer.status_code == 400, answer.text
    assert re.search(message, answer.json()["error"]["message"]), answer.text
    good = grpc_client.schedule(MATMUL, {"m": 16, "k": 16, "n": 16}, measure=False, time_limit_s=2)
    assert sorted(loop.index for loop in good.loops if loop.tail == 0) or good.schedule
    assert_still_serving(grpc_client, https, add_ir, reference)


# --- transport-level garbage ----------------------------------------------------------------------------


def _http_error(answer: httpx.Response, status: int, message: str) -> None:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert re.search(message, error["message"]), error


def test_malformed_json(https, grpc_client, add_ir, reference):
    body = (CORPUS / "malformed.json").read_bytes()
    answer = https.post("/v1/optimize", content=body, headers={"content-type": "application/json"})
    _http_error(answer, 400, "JSON")
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_json_of_the_wrong_shape(https, grpc_client, add_ir, reference):
    answer = https.post("/v1/optimize", json=["define i32 @f()"])
    _http_error(answer, 400, "body")
    answer = https.post("/v1/optimize", json={"ir": 42})
    _http_error(answer, 400, "ir")
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_unknown_and_conflicting_fields(https, grpc_client, add_ir, reference):
    _http_error(https.post("/v1/optimize", json={"ir": add_ir, "passes": ["sroa"]}), 400, "passes")
    both = {"ir": add_ir, "ir_bitcode": base64.b64encode(b"BC").decode()}
    _http_error(https.post("/v1/optimize", json=both), 400, "exactly one")
    _http_error(https.post("/v1/optimize", json={}), 400, "exactly one")
    _http_error(https.post("/v1/optimize", json={"ir": add_ir, "strategy": "bogus"}), 400, "strategy")
    _http_error(https.post("/v1/optimize", json={"ir_bitcode": "***not base64***"}), 400, "ir_bitcode")
    assert_still_serving(grpc_client, https, add_ir, reference)


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream", "application/xml"],
)
def test_wrong_content_type(content_type, https, grpc_client, add_ir, reference):
    body = json.dumps({"ir": add_ir}).encode() if content_type != "application/xml" else b"<ir/>"
    answer = https.post("/v1/optimize", content=body, headers={"content-type": content_type})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_oversized_http_body_is_413_before_reading(https, grpc_client, add_ir, reference):
    body = json.dumps({"ir": "x" * (3 * MAX_IR_BYTES)})
    answer = https.post("/v1/optimize", content=body, headers={"content-type": "application/json"})
    _http_error(answer, 413, "more than")
    assert answer.json()["error"]["code"] == "RESOURCE_EXHAUSTED"
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_oversized_grpc_message(grpc_client, https, add_ir, reference):
    with pytest.raises(CallError) as caught:
        _grpc_optimize(grpc_client, "; " + "x" * (8 * MAX_IR_BYTES), {})
    assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert re.search("larger than max|message", caught.value.message, re.I), caught.value.message
    assert_still_serving(grpc_client, https, add_ir, reference)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_malformed_protobuf_bytes(seed, rel_service, grpc_client, https, add_ir, reference):
    """Raw garbage where a serialized OptimizeRequest belongs (a generic unary call, no stub)."""
    endpoints, _ = rel_service
    garbage = bytes(random.Random(seed).randrange(256) for _ in range(64 + 300 * seed))
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        call = channel.unary_unary("/optserve.v1.PassOrdering/Optimize")
        with pytest.raises(grpc.RpcError) as caught:
            call(garbage, timeout=60, metadata=(("authorization", f"Bearer {TOKEN}"),))
    # Ray Serve's proxy passes the bytes on undecoded and the ingress parses them
    # (serve/edges/grpc_services.py), as the TLS front does (test_reliability_grpc_tls.py).
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert "not a valid optserve.v1.OptimizeRequest message" in caught.value.details()
    assert_still_serving(grpc_client, https, add_ir, reference)


@pytest.mark.parametrize(
    ("method", "message_type"),
    [
        ("/optserve.v1.LoopTune/Schedule", "optserve.v1.ScheduleRequest"),
        ("/optserve.v1.PassOrdering/GetModelMetadata", "optserve.v1.ModelMetadataRequest"),
        ("/grpc.health.v1.Health/Check", "grpc.health.v1.HealthCheckRequest"),
    ],
)
def test_malformed_protobuf_bytes_for_every_method(
    method, message_type, rel_service, grpc_client, https, add_ir, reference
):
    """A field 1 whose length is cut off: not a valid message of any type."""
    endpoints, _ = rel_service
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        call = channel.unary_unary(method)
        with pytest.raises(grpc.RpcError) as caught:
            call(b"\x0a\xff", timeout=60, metadata=(("authorization", f"Bearer {TOKEN}"),))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert f"not a valid {message_type} message" in caught.value.details()
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_malformed_protobuf_bytes_without_token_is_unauthenticated(
    rel_service, grpc_client, https, add_ir, reference
):
    """The token is checked before the request is parsed: a caller without it learns nothing more."""
    endpoints, _ = rel_service
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        call = channel.unary_unary("/optserve.v1.PassOrdering/Optimize")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"\x0a\xff", timeout=60)
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED, caught.value
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_invalid_utf8_in_a_proto_string_field(rel_service, grpc_client, https, add_ir, reference):
    """Field 1 (ir_text, a proto3 string) carrying bytes that are not UTF-8."""
    endpoints, _ = rel_service
    payload = b"\x0a\x04\xff\xfe\xfd\xfc"
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        call = channel.unary_unary("/optserve.v1.PassOrdering/Optimize")
        with pytest.raises(grpc.RpcError) as caught:
            call(payload, timeout=60, metadata=(("authorization", f"Bearer {TOKEN}"),))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert "bad UTF-8" in caught.value.details()
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_unknown_enum_value_over_grpc(grpc_client, https, add_ir, reference):
    request = pb.OptimizeRequest(ir_text=add_ir, strategy=77, bypass_cache=True)
    with pytest.raises(CallError) as caught:
        grpc_client._call(grpc_client._pass_ordering.Optimize, request)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "strategy" in caught.value.message
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_unknown_method_over_grpc(rel_service, grpc_client, https, add_ir, reference):
    endpoints, _ = rel_service
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        call = channel.unary_unary("/optserve.v1.PassOrdering/DropTables")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", timeout=60, metadata=(("authorization", f"Bearer {TOKEN}"),))
    assert caught.value.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND), caught.value
    assert_still_serving(grpc_client, https, add_ir, reference)


def test_missing_or_wrong_token(rel_service, tls_files, grpc_client, https, add_ir, reference):
    endpoints, _ = rel_service
    from optserve.clients.python.client import OptserveClient

    for token in ("", "wrong-token"):
        with OptserveClient(endpoints.grpc_target, token=token, timeout_s=60) as anonymous:
            with pytest.raises(CallError) as caught:
                anonymous.optimize(add_ir)
            assert caught.value.code is grpc.StatusCode.UNAUTHENTICATED
        headers = {"authorization": f"Bearer {token}"} if token else {}
        answer = httpx.post(
            f"{endpoints.http_url}/v1/optimize",
            json={"ir": add_ir},
            headers=headers,
            verify=str(tls_files[0]),
        )
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "UNAUTHENTICATED"
    assert_still_serving(grpc_client, https, add_ir, reference)
