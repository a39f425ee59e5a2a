"""gRPC over TLS: the TLS front (serve/edges/grpc_tls.py) the service runs on GRPC_TLS_PORT when TLS is
configured.

Every test talks real TLS to the running service with the self-signed certificate of conftest.py as the CA,
and checks that the service still answers afterwards.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from optserve.clients.python.client import CallError, OptserveClient
from optserve.serve.edges.grpc_tls import TlsFront, TlsFrontConfig
from optserve.testing.service import TOKEN
from optserve.v1 import optserve_pb2 as pb
from tests.reliability.conftest import GRPC_PORT, GRPC_TLS_PORT

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture(scope="module")
def reference(grpc_client, add_ir) -> pb.OptimizeResponse:
    """The plaintext answer to a valid request: answers through TLS must equal it."""
    return grpc_client.optimize(add_ir)


@pytest.fixture
def tls_channel(rel_service, tls_files):
    endpoints, _ = rel_service
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_files[0].read_bytes())
    with grpc.secure_channel(endpoints.grpc_tls_target, credentials) as channel:
        yield channel


def assert_still_serving_over_tls(grpc_tls_client, add_ir, reference) -> None:
    again = grpc_tls_client.optimize(add_ir)
    assert (again.best.cost, again.oz_cost, again.ir_sha256) == (
        reference.best.cost,
        reference.oz_cost,
        reference.ir_sha256,
    )


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback (the route out), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_service_reports_the_tls_port(rel_service):
    endpoints, _ = rel_service
    assert endpoints.tls and endpoints.grpc_tls_port == GRPC_TLS_PORT
    assert endpoints.grpc_tls_target.endswith(f":{GRPC_TLS_PORT}")
    assert "over TLS" in endpoints.describe()


def test_handshake_with_a_self_signed_ca_and_health(grpc_tls_client):
    assert grpc_tls_client.health() == "SERVING"
    assert grpc_tls_client.health("optserve.v1.PassOrdering") == "SERVING"
    assert grpc_tls_client.health("optserve.v1.LoopTune") == "SERVING"
    with pytest.raises(CallError) as caught:
        grpc_tls_client.health("optserve.v1.Nothing")
    assert caught.value.code is grpc.StatusCode.NOT_FOUND and "unknown service" in caught.value.message


def test_optimize_over_tls_gives_the_plaintext_answer(grpc_tls_client, add_ir, reference):
    answer = grpc_tls_client.optimize(add_ir, return_ir=True, bypass_cache=True)
    assert (answer.best.cost, answer.oz_cost, answer.ir_sha256) == (
        reference.best.cost,
        reference.oz_cost,
        reference.ir_sha256,
    )
    assert answer.best.cost <= answer.oz_cost and "define" in answer.optimized_ir


def test_schedule_and_model_metadata_over_tls(grpc_tls_client):
    schedule = grpc_tls_client.schedule(MATMUL, {"m": 16, "k": 16, "n": 16}, measure=False, time_limit_s=2)
    assert {loop.index for loop in schedule.loops} == {"m", "k", "n"} and schedule.schedule
    assert grpc_tls_client.model_metadata().ready


@pytest.mark.parametrize("token", ["", "wrong-token"])
def test_missing_or_wrong_token_over_tls_is_unauthenticated(
    token, rel_service, tls_files, grpc_tls_client, add_ir, reference
):
    endpoints, _ = rel_service
    with OptserveClient(
        endpoints.grpc_tls_target, token=token, timeout_s=60, ca_cert=tls_files[0]
    ) as anonymous:
        with pytest.raises(CallError) as caught:
            anonymous.optimize(add_ir)
        assert caught.value.code is grpc.StatusCode.UNAUTHENTICATED
        assert "Bearer" in caught.value.message
        assert anonymous.health() == "SERVING"  # health needs no token, over TLS too
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_plaintext_client_to_the_tls_port_fails_cleanly(rel_service, grpc_tls_client, add_ir, reference):
    endpoints, _ = rel_service
    started = time.monotonic()
    with (
        OptserveClient(endpoints.grpc_tls_target, timeout_s=10) as plaintext,
        pytest.raises(CallError) as caught,
    ):
        plaintext.health()
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE, caught.value
    assert time.monotonic() - started < 9, "a refused handshake must not wait for the deadline"
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_a_certificate_the_client_does_not_trust_is_refused(rel_service, grpc_tls_client, add_ir, reference):
    endpoints, _ = rel_service
    with (
        OptserveClient(endpoints.grpc_tls_target, timeout_s=10, tls=True, ca_cert=None) as system_roots,
        pytest.raises(CallError) as caught,
    ):
        system_roots.health()
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE, caught.value
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_garbage_protobuf_over_tls_is_invalid_argument(seed, tls_channel, grpc_tls_client, add_ir, reference):
    garbage = bytes(random.Random(seed).randrange(256) for _ in range(64 + 300 * seed))
    call = tls_channel.unary_unary("/optserve.v1.PassOrdering/Optimize")
    with pytest.raises(grpc.RpcError) as caught:
        call(garbage, timeout=60, metadata=AUTH)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert "not a valid optserve.v1.OptimizeRequest message" in caught.value.details()
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_truncated_request_over_tls_is_invalid_argument(tls_channel, grpc_tls_client, add_ir, reference):
    whole = pb.ScheduleRequest(einsum=MATMUL, sizes={"m": 16, "k": 16, "n": 16}).SerializeToString()
    call = tls_channel.unary_unary("/optserve.v1.LoopTune/Schedule")
    with pytest.raises(grpc.RpcError) as caught:
        call(whole[: len(whole) // 2], timeout=60, metadata=AUTH)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert "optserve.v1.ScheduleRequest" in caught.value.details()
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_service_errors_keep_their_code_and_message_over_tls(grpc_client, grpc_tls_client, add_ir, reference):
    for client in (grpc_client, grpc_tls_client):
        with pytest.raises(CallError) as caught:
            client.optimize("define i32 @f( {")
        assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
        if client is grpc_client:
            plaintext_message = caught.value.message
    assert caught.value.message == plaintext_message
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_unknown_method_over_tls_is_unimplemented(tls_channel, grpc_tls_client, add_ir, reference):
    with pytest.raises(grpc.RpcError) as caught:
        tls_channel.unary_unary("/optserve.v1.PassOrdering/DropTables")(b"", timeout=30, metadata=AUTH)
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_a_short_deadline_over_tls_ends_the_call_in_time(tls_channel, grpc_tls_client, add_ir, reference):
    request = pb.OptimizeRequest(ir_text=add_ir, bypass_cache=True, strategy=pb.PRIORITY, samples=20)
    call = tls_channel.unary_unary(
        "/optserve.v1.PassOrdering/Optimize",
        request_serializer=pb.OptimizeRequest.SerializeToString,
        response_deserializer=pb.OptimizeResponse.FromString,
    )
    started = time.monotonic()
    try:  # the call's deadline reaches the ingress (serve/edges/grpc_edge.py): an answer in time, else none
        response = call(request, timeout=0.05, metadata=AUTH)
        assert response.deadline_hit  # 20 candidates do not fit the 25 ms it may work
    except grpc.RpcError as err:
        assert err.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 5
    assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)


def test_server_reflection_streams_over_tls(tls_channel):
    reflection = reflection_pb2_grpc.ServerReflectionStub(tls_channel)
    answers = list(
        reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=30
        )
    )
    names = {service.name for service in answers[0].list_services_response.service}
    assert {"optserve.v1.PassOrdering", "optserve.v1.LoopTune", "grpc.health.v1.Health"} <= names


def test_garbage_in_a_reflection_stream_is_invalid_argument(tls_channel, grpc_tls_client):
    stream = tls_channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    with pytest.raises(grpc.RpcError) as caught:
        list(stream(iter([b"\xff\xff\xff"]), timeout=30))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "grpc.reflection.v1alpha.ServerReflectionRequest" in caught.value.details()
    assert grpc_tls_client.health() == "SERVING"


def test_serve_healthz_over_tls(tls_channel):
    healthz = tls_channel.unary_unary("/ray.serve.RayServeAPIService/Healthz")
    assert b"success" in healthz(b"", timeout=30)


def test_tls_port_and_plaintext_grpc_listen_on_loopback_only(grpc_tls_client):
    """serve.host is loopback: the TLS front and plaintext gRPC (serve/replicas/loopback.py) bind loopback
    only, so neither is reachable over another interface (the ingress would also refuse such a caller:
    check_peer)."""
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this host has no non-loopback address")
    for port in (GRPC_TLS_PORT, GRPC_PORT):
        with socket.socket() as probe:
            assert probe.connect_ex((address, port)) != 0, port
    assert grpc_tls_client.health() == "SERVING"


def test_killed_tls_front_is_restarted_by_ray(rel_service, grpc_tls_client, add_ir, reference):
    """SIGKILL the process serving the TLS port: Ray restarts the actor, the port answers again."""
    import os
    import signal

    import psutil

    [pid] = {
        conn.pid
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == GRPC_TLS_PORT
    }
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 90
    while True:
        try:
            assert_still_serving_over_tls(grpc_tls_client, add_ir, reference)
            break
        except CallError as err:
            assert err.code is grpc.StatusCode.UNAVAILABLE, err
            assert time.monotonic() < deadline, "the TLS front did not come back within 90 s"
            time.sleep(1)
    assert grpc_tls_client.health() == "SERVING"


def test_front_refuses_to_start_with_a_key_that_is_not_pem(tls_files):
    config = TlsFrontConfig(
        listen="127.0.0.1:0",
        upstream="127.0.0.1:1",
        certificate_chain=tls_files[0].read_bytes(),
        private_key=b"not a key",
        max_message_bytes=1 << 20,
    )
    with pytest.raises(Exception):  # noqa: B017, PT011 - grpc raises a plain RuntimeError or similar
        TlsFront(config).start()


def test_front_without_upstream_answers_unavailable(tls_files):
    """The relay's own behaviour when Ray's proxy is gone: a clean UNAVAILABLE, not a hang."""
    cert, key = tls_files
    config = TlsFrontConfig(
        listen="127.0.0.1:0",
        upstream="127.0.0.1:1",
        certificate_chain=cert.read_bytes(),
        private_key=key.read_bytes(),
        max_message_bytes=1 << 20,
    )
    front = TlsFront(config)
    port = front.start()
    try:
        with (
            OptserveClient(f"localhost:{port}", timeout_s=10, ca_cert=cert) as client,
            pytest.raises(CallError) as caught,
        ):
            client.health()
        assert caught.value.code is grpc.StatusCode.UNAVAILABLE
        with (
            OptserveClient(f"localhost:{port}", timeout_s=10, ca_cert=cert) as client,
            pytest.raises(CallError) as caught,
        ):
            client.optimize(b"\x00garbage")
        assert caught.value.code is grpc.StatusCode.UNAVAILABLE  # bitcode field is bytes: valid protobuf
    finally:
        front.stop()


def test_health_check_request_type_is_checked_by_the_front(tls_files):
    """Garbage is refused before any upstream is contacted (here there is none)."""
    cert, key = tls_files
    front = TlsFront(
        TlsFrontConfig("127.0.0.1:0", "127.0.0.1:1", cert.read_bytes(), key.read_bytes(), 1 << 20)
    )
    port = front.start()
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with (
            grpc.secure_channel(f"localhost:{port}", credentials) as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            channel.unary_unary("/grpc.health.v1.Health/Check")(b"\xff\xff\xff", timeout=10)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert health_pb2.HealthCheckRequest.DESCRIPTOR.full_name in caught.value.details()
    finally:
        front.stop()


def test_cli_health_over_tls(rel_service, tls_files, capsys):
    from optserve.cli import main

    endpoints, _ = rel_service
    target = endpoints.grpc_tls_target
    argv = ["health", "--target", target, "--ca-cert", str(tls_files[0]), "--token", TOKEN, "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["server"] == "SERVING" and result["model"]["ready"]
    assert main(["health", "--target", target, "--timeout", "10"]) == 1  # plaintext to the TLS port
    assert "UNAVAILABLE" in capsys.readouterr().err


def test_optcc_compiles_through_tls(rel_service, tls_files, tmp_path):
    """optcc takes the CA from $OPTSERVE_CA_CERT and gets its object code from the service over TLS."""
    endpoints, _ = rel_service
    source = tmp_path / "unit.c"
    source.write_text("int twice(int x) { int y = x; return y + y; }\n")
    log = tmp_path / "optcc.jsonl"
    environment = os.environ | {
        "OPTCC_SERVER": endpoints.grpc_tls_target,
        "OPTSERVE_CA_CERT": str(tls_files[0]),
        "OPTSERVE_TOKEN": TOKEN,
        "OPTCC_LOG": str(log),
        "OPTCC_OBJECTIVE": "instruction_count",
        "TMPDIR": str(tmp_path),
        # No per-unit budget (the fixed OPTCC_DEADLINE): a unit this small is otherwise not worth a call.
        "OPTCC_BUDGET": "0",
    }
    optcc = Path(sys.executable).with_name("optcc")
    done = subprocess.run(
        [optcc, "-Oz", "-c", str(source), "-o", str(tmp_path / "unit.o")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "instead" not in done.stderr, done.stderr  # no fallback to clang -Oz
    [record] = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["outcome"] == "service" and record["cost"] <= record["oz_cost"]
    assert (tmp_path / "unit.o").read_bytes()[:4] == b"\x7fELF"


class _RecordingUpstream:
    """A plaintext gRPC server standing in for Ray's proxy (the real relay is covered above): it records what
    reached it and answers NOT_FOUND with details and trailing metadata, to check what the front carries."""

    def __init__(self):
        from concurrent import futures

        self.seen: list[tuple[float | None, dict]] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handler = grpc.unary_unary_rpc_method_handler(self._check)
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": handler}),)
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _check(self, request: bytes, context) -> bytes:
        self.seen.append((context.time_remaining(), dict(context.invocation_metadata())))
        context.set_trailing_metadata((("x-upstream", "yes"),))
        context.abort(grpc.StatusCode.NOT_FOUND, "nothing called " + request.decode(errors="replace"))


@pytest.mark.parametrize("timeout_s", [7.0, None])
def test_front_relays_metadata_deadline_status_and_details(tls_files, timeout_s):
    cert, key = tls_files
    upstream = _RecordingUpstream()
    front = TlsFront(
        TlsFrontConfig(
            "127.0.0.1:0", f"127.0.0.1:{upstream.port}", cert.read_bytes(), key.read_bytes(), 1 << 20
        )
    )
    port = front.start()
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        request = health_pb2.HealthCheckRequest(service="x").SerializeToString()
        with (
            grpc.secure_channel(f"localhost:{port}", credentials) as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            channel.unary_unary("/grpc.health.v1.Health/Check")(
                request, timeout=timeout_s, metadata=(*AUTH, ("x-request-id", "42"))
            )
    finally:
        front.stop()
        upstream.server.stop(None)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert caught.value.details().startswith("nothing called")
    assert ("x-upstream", "yes") in tuple(caught.value.trailing_metadata())
    [(remaining, metadata)] = upstream.seen
    assert metadata["authorization"] == f"Bearer {TOKEN}" and metadata["x-request-id"] == "42"
    if timeout_s is None:
        assert remaining is None or remaining > 1e6
    else:
        assert 0 < remaining <= timeout_s + 0.1  # the two ends' clocks differ by milliseconds
