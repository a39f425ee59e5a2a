"""The asyncio Python client of optserve (grpc.aio): the calls of `OptserveClient`, awaited, so one event
loop can keep many requests in flight over one channel.

    async with AsyncOptserveClient("localhost:9000") as client:
        answers = await asyncio.gather(*(client.optimize(ir, strategy="priority", samples=10) for ir in irs))

Same settings, retries and errors as the sync client (clients/python/client.py): CallError on an error answer.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Unpack

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from optserve.clients.python.channel import ChannelSettings
from optserve.clients.python.requests import (
    DEFAULT_TIMEOUT_S,
    CallError,
    OptimizeOptions,
    optimize_request,
    optimize_timeout_s,
    schedule_request,
    schedule_timeout_s,
    within_call,
)
from optserve.clients.python.retry import DEFAULT_RETRY, NO_RETRY, Attempts, RetryPolicy
from optserve.v1 import optserve_pb2 as pb
from optserve.v1 import optserve_pb2_grpc as pb_grpc


class AsyncOptserveClient:
    def __init__(
        self,
        target: str = "localhost:9000",
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = 64 * 1024 * 1024,
        application: str | None = None,
        tls: bool = False,
        ca_cert: str | os.PathLike | None = None,
        retry: RetryPolicy | None = DEFAULT_RETRY,
    ):
        """Arguments as for `OptserveClient`. Create it inside the event loop that will await its calls."""
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
            self.channel = grpc.aio.secure_channel(target, credentials, options=self.settings.options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=self.settings.options)
        self._pass_ordering = pb_grpc.PassOrderingStub(self.channel)
        self._looptune = pb_grpc.LoopTuneStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    async def _call(self, method, request, timeout_s: float | None = None):
        attempts = Attempts(self.retry, timeout_s or self.timeout_s)
        while True:
            try:
                remaining_s = attempts.remaining_s()
                sent = within_call(request, remaining_s) if attempts.retries else request
                return await method(sent, timeout=remaining_s, metadata=self.settings.metadata)
            except grpc.RpcError as err:  # grpc.aio.AioRpcError
                pause_s = attempts.pause_before_next(err)
                if pause_s is None:
                    raise CallError.of(err) from None
            await asyncio.sleep(pause_s)

    async def optimize(self, ir: str | bytes, **options: Unpack[OptimizeOptions]) -> pb.OptimizeResponse:
        """As `OptserveClient.optimize`."""
        request = optimize_request(ir, **options)
        return await self._call(self._pass_ordering.Optimize, request, optimize_timeout_s(request))

    async def model_metadata(self) -> pb.ModelMetadata:
        return await self._call(self._pass_ordering.GetModelMetadata, pb.ModelMetadataRequest())

    async def schedule(
        self,
        einsum: str,
        sizes: Mapping[str, int],
        method: str = "",
        time_limit_s: float = 0.0,
        measure: bool = True,
        return_kernel: bool = False,
        threads: int = 0,
    ) -> pb.ScheduleResponse:
        """As `OptserveClient.schedule`."""
        request = schedule_request(einsum, sizes, method, time_limit_s, measure, return_kernel, threads)
        return await self._call(self._looptune.Schedule, request, schedule_timeout_s(request))

    async def health(self, service: str = "") -> str:
        response = await self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> AsyncOptserveClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()
