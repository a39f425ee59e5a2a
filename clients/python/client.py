"""Python client of a running optserve (gRPC): what `optserve optimize/schedule/health` and scripts use.

    with OptserveClient("localhost:9000") as client:
        answer = client.optimize(Path("f.ll").read_text(), strategy="priority", samples=10)
        print(answer.best.pipeline, answer.best.cost, answer.oz_cost)

    async with AsyncOptserveClient("localhost:9000") as client:          # the same calls, awaited (grpc.aio)
        answers = await asyncio.gather(*(client.optimize(ir) for ir in modules))

Sampling: `client.optimize(ir, strategy="nucleus", samples=10, temperature=0.8, top_p=0.95, seed=7)`.

Over TLS (the service's gRPC TLS port, serve.grpc_tls_port): `OptserveClient("host:9443", tls=True,
ca_cert="ca.pem")`; without `ca_cert` the system's root certificates are trusted.

Retries: a call answered UNAVAILABLE or RESOURCE_EXHAUSTED is tried again with exponential backoff, up to
3 tries in all, within the call's deadline (`retry=RetryPolicy(...)` to change it, `retry=None` for none;
clients/python/retry.py). Calls raise `CallError` (status code name + the server's message) when the
service answers an error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Unpack

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from optserve.clients.python.aio import AsyncOptserveClient
from optserve.clients.python.channel import CA_CERT_ENV, TOKEN_ENV, ChannelSettings
from optserve.clients.python.requests import (
    DEADLINE_MARGIN_S,
    DEFAULT_TIMEOUT_S,
    CallError,
    OptimizeOptions,
    optimize_request,
    optimize_timeout_s,
    schedule_request,
    schedule_timeout_s,
    to_dict,
    within_call,
)
from optserve.clients.python.retry import DEFAULT_RETRY, NO_RETRY, Attempts, RetryPolicy
from optserve.v1 import optserve_pb2 as pb
from optserve.v1 import optserve_pb2_grpc as pb_grpc

__all__ = [
    "CA_CERT_ENV",
    "DEADLINE_MARGIN_S",
    "DEFAULT_TARGET",
    "DEFAULT_TIMEOUT_S",
    "LOOPTUNE_SERVICE",
    "NO_RETRY",
    "PASS_ORDERING_SERVICE",
    "TOKEN_ENV",
    "AsyncOptserveClient",
    "CallError",
    "OptserveClient",
    "RetryPolicy",
    "to_dict",
]

DEFAULT_TARGET = "localhost:9000"
# The services' full names, as health checks take them (from the .proto, so the client needs no server code).
PASS_ORDERING_SERVICE = pb.DESCRIPTOR.services_by_name["PassOrdering"].full_name
LOOPTUNE_SERVICE = pb.DESCRIPTOR.services_by_name["LoopTune"].full_name


class OptserveClient:
    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = 64 * 1024 * 1024,
        application: str | None = None,
        tls: bool = False,
        ca_cert: str | os.PathLike | None = None,
        retry: RetryPolicy | None = DEFAULT_RETRY,
    ):
        """`application`: the Ray Serve application to call, needed only when a cluster runs several.
        `tls`: call over TLS; `ca_cert` (default $OPTSERVE_CA_CERT): PEM file of the CA to trust, and
        implies `tls`. `retry`: how UNAVAILABLE / RESOURCE_EXHAUSTED answers are retried (None: never)."""
        self.timeout_s = timeout_s
        self.retry = retry if retry is not None else NO_RETRY
        self.settings = ChannelSettings.of(
            target,
            token=token,
            ca_cert=ca_cert,
            max_message_bytes=max_message_bytes,
            application=application,
            tls=tls,
        )
        credentials = self.settings.credentials
        if credentials is not None:
            self.channel = grpc.secure_channel(target, credentials, options=self.settings.options)
        else:
            self.channel = grpc.insecure_channel(target, options=self.settings.options)
        self._pass_ordering = pb_grpc.PassOrderingStub(self.channel)
        self._looptune = pb_grpc.LoopTuneStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    def _call(self, method, request, timeout_s: float | None = None):
        """One call, retried as `self.retry` says; every try and pause within `timeout_s` in all."""
        attempts = Attempts(self.retry, timeout_s or self.timeout_s)
        while True:
            try:
                remaining_s = attempts.remaining_s()
                sent = within_call(request, remaining_s) if attempts.retries else request
                return method(sent, timeout=remaining_s, metadata=self.settings.metadata)
            except grpc.RpcError as err:
                pause_s = attempts.pause_before_next(err)
                if pause_s is None:
                    raise CallError.of(err) from None
            time.sleep(pause_s)

    def optimize(self, ir: str | bytes, **options: Unpack[OptimizeOptions]) -> pb.OptimizeResponse:
        """The best pass list for `ir` (text, or bitcode as bytes) and every ranked candidate.

        Options (requests.OptimizeOptions): objective, strategy, samples, feedback_rounds, deadline_s,
        return_ir, return_object, bypass_cache, and for nucleus sampling temperature, top_p, seed."""
        request = optimize_request(ir, **options)
        return self._call(self._pass_ordering.Optimize, request, optimize_timeout_s(request))

    def model_metadata(self) -> pb.ModelMetadata:
        return self._call(self._pass_ordering.GetModelMetadata, pb.ModelMetadataRequest())

    def schedule(
        self,
        einsum: str,
        sizes: Mapping[str, int],
        method: str = "",
        time_limit_s: float = 0.0,
        measure: bool = True,
        return_kernel: bool = False,
        threads: int = 0,
    ) -> pb.ScheduleResponse:
        """A loop schedule for the contraction `einsum` with index `sizes`, its kernel on up to `threads`
        threads (0: the deployment's CPUs)."""
        request = schedule_request(einsum, sizes, method, time_limit_s, measure, return_kernel, threads)
        return self._call(self._looptune.Schedule, request, schedule_timeout_s(request))

    def health(self, service: str = "") -> str:
        """`SERVING` / `NOT_SERVING` for the server ("") or one service (e.g. optserve.v1.PassOrdering)."""
        response = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> OptserveClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
