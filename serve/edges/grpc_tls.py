"""The TLS front for gRPC: a TLS server that relays every optserve gRPC method to Ray Serve's plaintext port.

Ray Serve 2.60's gRPC proxy only opens an insecure port. When `serve.tls_certfile`/`tls_keyfile` are set,
the launcher (serve/server.py) runs this front on `serve.grpc_tls_port` with the same certificate HTTPS uses,
and the ingress then serves plaintext gRPC to loopback callers only (this front and local tools).

Each call is relayed as raw bytes: the front parses the request with its message type first, so garbage is
answered INVALID_ARGUMENT here (grpcio itself would answer UNKNOWN), then forwards the bytes with the
caller's metadata (the auth token, `application`) and remaining deadline, and hands back the answer, the
status code, its details and the metadata. Cancelling the call cancels the relayed one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from ray.serve.generated import serve_pb2

from optserve.deadline import NO_DEADLINE_S
from optserve.serve.edges.grpc_services import decode_problem
from optserve.v1 import optserve_pb2

# What Ray Serve's proxy serves for optserve: our services, health Check (serve/edges/grpc_health.py registers
# no Watch), Serve's own API (Healthz, ListApplications) and server reflection (a bidirectional stream).
_FORWARDED_SERVICES = [
    (optserve_pb2.DESCRIPTOR.services_by_name["PassOrdering"], None),
    (optserve_pb2.DESCRIPTOR.services_by_name["LoopTune"], None),
    (health_pb2.DESCRIPTOR.services_by_name["Health"], {"Check"}),
    (serve_pb2.DESCRIPTOR.services_by_name["RayServeAPIService"], None),
    (reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"], None),
]
# Metadata that gRPC itself sets on each hop, never copied from one call to the next.
_HOP_METADATA = {"user-agent", "te", "content-type"}


@dataclass(frozen=True)
class RelayedMethod:
    path: str  # /package.Service/Method
    request_type: type
    streams_requests: bool
    streams_responses: bool


def relayed_methods() -> dict[str, RelayedMethod]:
    methods = {}
    for service, only in _FORWARDED_SERVICES:
        for method in service.methods:
            if only is None or method.name in only:
                path = f"/{service.full_name}/{method.name}"
                methods[path] = RelayedMethod(
                    path, GetMessageClass(method.input_type), method.client_streaming, method.server_streaming
                )
    return methods


def _end_to_end(metadata) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(
        (key, value)
        for key, value in metadata or ()
        if not key.startswith((":", "grpc-")) and key not in _HOP_METADATA
    )


def _timeout(context: grpc.aio.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None or remaining > NO_DEADLINE_S else max(remaining, 0.0)


def _parse_error(method: RelayedMethod, raw: bytes) -> str | None:
    """Why `raw` is not a serialized request of `method`, or None if it is one."""
    problem = decode_problem(method.request_type, raw)
    return None if problem is None else f"{method.path}: {problem}"


class _Relay(grpc.GenericRpcHandler):
    """Relays the known methods over one upstream channel; unknown methods get gRPC's UNIMPLEMENTED."""

    def __init__(self, channel: grpc.aio.Channel):
        self.channel = channel
        self.methods = relayed_methods()

    def service(self, handler_call_details):
        method = self.methods.get(handler_call_details.method)
        if method is None:
            return None
        if method.streams_requests or method.streams_responses:
            return grpc.stream_stream_rpc_method_handler(self._stream_relay(method))
        return grpc.unary_unary_rpc_method_handler(self._unary_relay(method))

    def _unary_relay(self, method: RelayedMethod):
        upstream = self.channel.unary_unary(method.path)

        async def relay(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            problem = _parse_error(method, request)
            if problem is not None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
            call = upstream(
                request, timeout=_timeout(context), metadata=_end_to_end(context.invocation_metadata())
            )
            try:
                response = await call
            except grpc.aio.AioRpcError as err:
                await _abort_like(context, err)
            await _copy_metadata(call, context)
            return response

        return relay

    def _stream_relay(self, method: RelayedMethod):
        upstream = self.channel.stream_stream(method.path)

        async def relay(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext):
            problems: list[str] = []

            async def checked_requests():
                async for request in requests:
                    problem = _parse_error(method, request)
                    if problem is not None:
                        problems.append(problem)
                        return
                    yield request

            call = upstream(
                checked_requests(),
                timeout=_timeout(context),
                metadata=_end_to_end(context.invocation_metadata()),
            )
            try:
                async for response in call:
                    yield response
            except grpc.aio.AioRpcError as err:
                if not problems:
                    await _abort_like(context, err)
            if problems:
                call.cancel()
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problems[0])
            await _copy_metadata(call, context)

        return relay


async def _abort_like(context: grpc.aio.ServicerContext, err: grpc.aio.AioRpcError) -> None:
    await context.abort(err.code(), err.details() or "", _end_to_end(err.trailing_metadata()))


async def _copy_metadata(call, context: grpc.aio.ServicerContext) -> None:
    context.set_trailing_metadata(_end_to_end(await call.trailing_metadata()))


@dataclass(frozen=True)
class TlsFrontConfig:
    listen: str  # host:port the TLS server binds
    upstream: str  # host:port of the plaintext gRPC server (Ray Serve's proxy, on loopback)
    certificate_chain: bytes  # PEM
    private_key: bytes  # PEM
    max_message_bytes: int


class TlsFront:
    """Runs the TLS server on an event loop of its own thread; `port` is the port it bound."""

    def __init__(self, config: TlsFrontConfig):
        self.config = config
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._stop_requested: asyncio.Event | None = None
        self._grace_s = 1.0
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="optserve-grpc-tls", daemon=True)

    def start(self, timeout_s: float = 30.0) -> int:
        """Bind and serve; raises what went wrong (bad certificate, port in use) instead of serving."""
        self._thread.start()
        if not self._started.wait(timeout_s):
            raise TimeoutError(f"the gRPC TLS front did not start within {timeout_s} s")
        if self._failure is not None:
            raise self._failure
        return self.port

    def stop(self, grace_s: float = 1.0) -> None:
        if self._stop_requested is not None:
            self._grace_s = grace_s
            self._loop.call_soon_threadsafe(self._stop_requested.set)
        self._thread.join(grace_s + 5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        config = self.config
        limits = [
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.max_receive_message_length", config.max_message_bytes),
        ]
        try:
            channel = grpc.aio.insecure_channel(config.upstream, options=limits)
            server = grpc.aio.server(handlers=[_Relay(channel)], options=limits)
            credentials = grpc.ssl_server_credentials([(config.private_key, config.certificate_chain)])
            self.port = server.add_secure_port(config.listen, credentials)
            await server.start()
            self._stop_requested = asyncio.Event()
        except Exception as err:  # reported to start()'s caller
            self._failure = err
            self._started.set()
            return
        self._started.set()
        await self._stop_requested.wait()
        await server.stop(self._grace_s)
        await channel.close()


class TlsFrontProcess:
    """The front as a Ray actor (`ray.remote(TlsFrontProcess)`): started in __init__, so that Ray's restart
    of a crashed actor process also restarts the server."""

    def __init__(self, config: TlsFrontConfig):
        self.front = TlsFront(config)
        self.front.start()

    def port(self) -> int:
        return self.front.port

    def stop(self) -> None:
        self.front.stop()
