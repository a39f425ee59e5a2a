"""The gRPC methods of the ingress: Optimize, Schedule, GetModelMetadata and grpc.health.v1 `Check`.

Ray Serve's proxy routes a gRPC call to the ingress method named like the RPC, with the request as raw bytes
(serve/edges/grpc_services.py says why); the ingress hands it to the method of the same name here, which
parses it, checks the caller (loopback peer, token), runs the operation and answers a `ServiceError` as the
status it names. The call's deadline bounds the work: an Optimize's budget is cut to what the call leaves
(its best answer so far comes back in time, `deadline_hit`), a Schedule's search time limit too (the best
schedule found in time, `timed_out`), and any work still running when the call's time is up is cancelled
(DEADLINE_EXCEEDED). `grpc_context` is None when a test calls a method directly.

Ray Serve's gRPC proxy does not pass the call's deadline on to the replica (its context has no
`time_remaining`), so the proxy's edge (serve/edges/grpc_edge.py) adds it to the call's metadata as a Unix
time, read back here (`call_deadline`). Proxy and ingress share a clock on one machine; on a cluster their
clocks must agree to well under the deadlines callers use (NTP does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from grpc_health.v1 import health_pb2

from optserve.clients.python.retry import PUSHBACK_KEY
from optserve.config import Settings
from optserve.deadline import ANSWER_MARGIN_S, Deadline
from optserve.serve import schemas
from optserve.serve.edges import codec
from optserve.serve.edges.access import TOKEN_HEADER, check_peer, check_token, plaintext_grpc_host
from optserve.serve.edges.grpc_edge import DEADLINE_KEY
from optserve.serve.edges.grpc_services import parse_request
from optserve.serve.edges.operations import Operations
from optserve.serve.errors import ErrorKind, ServiceError, retry_after_s
from optserve.serve.observability.tracing import caller_trace
from optserve.serve.replicas.readiness import READY
from optserve.v1 import optserve_pb2 as pb

PASS_ORDERING_SERVICE = "optserve.v1.PassOrdering"
LOOPTUNE_SERVICE = "optserve.v1.LoopTune"
HEALTH_REASON_KEY = "optserve-not-serving-reason"  # trailing metadata of a NOT_SERVING health answer
# The readiness parts (serve/replicas/readiness.py) each gRPC service needs.
_SERVICE_PARTS = {PASS_ORDERING_SERVICE: ("model", "compiler"), LOOPTUNE_SERVICE: ("looptune",)}
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

M = TypeVar("M")


def call_deadline(metadata) -> Deadline | None:
    """The deadline of the call whose invocation metadata is `metadata`; None when it has none."""
    for key, value in metadata or ():
        if key == DEADLINE_KEY:
            try:
                return Deadline.from_wall(float(value))
            except ValueError:
                return None
    return None


def work_deadline(call: Deadline) -> Deadline:
    """When the work of a call due at `call` (not yet passed) must be done so that its answer still reaches
    the caller: ANSWER_MARGIN_S before the call's deadline, or halfway to it for a short call."""
    return Deadline(max(call.at - ANSWER_MARGIN_S, call.share(0.5).at))


def fit_optimize(
    request: schemas.OptimizeRequest, work: Deadline, default_s: float, max_s: float
) -> schemas.OptimizeRequest:
    """`request` with its deadline (its own, else the server's default) cut to what the work's deadline
    `work` leaves. A deadline over the limit is left as asked, to be refused as such."""
    asked_s = request.deadline_s or default_s
    budget_s = work.remaining_s()
    if asked_s > max_s or budget_s >= asked_s:
        return request
    return request.model_copy(update={"deadline_s": budget_s})


def _answer_error(context, err: ServiceError, empty: M) -> M:
    """A gRPC error answer: the status and message on the call, an empty response message; retry info
    (`grpc-retry-pushback-ms`, negative: do not retry) in the trailing metadata where the kind has some."""
    context.set_code(err.kind.grpc_code)
    context.set_details(err.message)
    pause_s = retry_after_s(err.kind)
    if pause_s is not None:
        context.set_trailing_metadata([(PUSHBACK_KEY, str(pause_s * 1000))])
    return empty


async def _within(call: Deadline | None, work: Callable[[Deadline | None], Awaitable[M]]) -> M:
    """`work(call)`, cancelled when the `call`'s deadline passes: nobody waits for its answer then. (Not
    `Deadline.within`: a TimeoutError of the work's own is not the call's deadline.)"""
    if call is None:
        return await work(None)
    remaining_s = call.remaining_s()
    if remaining_s <= 0:
        raise ServiceError(ErrorKind.DEADLINE_EXCEEDED, "the call's deadline passed before its work began")
    scope = asyncio.timeout(remaining_s)
    try:
        async with scope:
            return await work(call)
    except TimeoutError:
        if not scope.expired():  # the work's own timeout, not the call's
            raise
        raise ServiceError(
            ErrorKind.DEADLINE_EXCEEDED, f"the call's deadline ({remaining_s:.3f} s) passed before the answer"
        ) from None


class GrpcMethods:
    def __init__(self, operations: Operations, settings: Settings):
        self.operations = operations
        self.settings = settings

    async def _answer(
        self, operation: str, context, empty: M, work: Callable[[Deadline | None], Awaitable[M]]
    ) -> M:
        """Check the caller and run `work(call)` (the call's deadline; None: it has none) within the call,
        inside the operation's record (counted, timed, traced, logged: serve/edges/operations.py)."""
        try:
            call = trace_parent = None
            if context is not None:
                check_peer(context.peer(), plaintext_grpc_host(self.settings.serve))
                metadata = context.invocation_metadata()
                check_token(dict(metadata).get(TOKEN_HEADER), self.settings.serve.auth_token)
                call = call_deadline(metadata)
                trace_parent = caller_trace(metadata)
            async with self.operations.record(operation, "grpc", trace_parent):
                return await _within(call, work)
        except ServiceError as err:
            if context is None:
                raise
            return _answer_error(context, err, empty)

    async def optimize(self, request: bytes, context) -> pb.OptimizeResponse:
        async def work(call: Deadline | None) -> pb.OptimizeResponse:
            optimize_request = codec.optimize_request(parse_request(pb.OptimizeRequest, request))
            if call is not None:
                serve = self.settings.serve
                optimize_request = fit_optimize(
                    optimize_request, work_deadline(call), serve.default_deadline_s, serve.max_deadline_s
                )
            return codec.optimize_response(await self.operations.optimize(optimize_request))

        return await self._answer("optimize", context, pb.OptimizeResponse(), work)

    async def model_metadata(self, request: bytes, context) -> pb.ModelMetadata:
        async def work(call: Deadline | None) -> pb.ModelMetadata:
            parse_request(pb.ModelMetadataRequest, request)  # no fields, but garbage is still refused
            return codec.model_metadata(await self.operations.model_metadata())

        return await self._answer("model_metadata", context, pb.ModelMetadata(), work)

    async def schedule(self, request: bytes, context) -> pb.ScheduleResponse:
        async def work(call: Deadline | None) -> pb.ScheduleResponse:
            schedule_request = codec.schedule_request(parse_request(pb.ScheduleRequest, request))
            deadline = None if call is None else work_deadline(call)
            return codec.schedule_response(await self.operations.schedule(schedule_request, deadline))

        return await self._answer("schedule", context, pb.ScheduleResponse(), work)

    async def check(self, request: bytes, context) -> Any:
        """grpc.health.v1: "" = the server answers; a service name = that service can do its work now."""
        try:
            service = parse_request(health_pb2.HealthCheckRequest, request).service
        except ServiceError as err:
            return _answer_error(context, err, health_pb2.HealthCheckResponse())
        if service == "":
            return health_pb2.HealthCheckResponse(status=_SERVING)
        if service not in _SERVICE_PARTS:
            unknown = ServiceError(ErrorKind.NOT_FOUND, f"unknown service {service!r}")
            return _answer_error(context, unknown, health_pb2.HealthCheckResponse())
        readiness = await self.operations.readiness()
        parts = _SERVICE_PARTS[service]
        reasons = [f"{part}: {readiness[part]}" for part in parts if readiness[part] != READY]
        if reasons and context is not None:  # the health protocol has no field for why
            reason = " ".join("; ".join(reasons).split()).encode("ascii", "replace").decode()  # a valid value
            context.set_trailing_metadata([(HEALTH_REASON_KEY, reason)])
        return health_pb2.HealthCheckResponse(status=_NOT_SERVING if reasons else _SERVING)
