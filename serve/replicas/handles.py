"""The back-end deployments, seen by the ingress through the plain seams the Optimize flow codes against.

- `EngineClient`: the engine deployment as an `optserve.engine.interface.Engine`, plus the model's metadata;
- `CompilerClient`: the CompilerWorkers deployment as an `optserve.compiler.interface.CandidateCompiler`;
- `LoopTuneClient`: the LoopTuneScheduler deployment.

What a failure behind a handle means to the caller is decided here and only here. Ray hands an exception that
a deployment raised to the caller wrapped in a `RayTaskError`; every call goes through `call`, which unwraps
it, so the layers above see the deployment's own error (a `ServiceError`, `PromptTooLongError`, ...). Ray's
own failures (overload, a replica gone) become the `ServiceError` they stand for in `as_service_error`. The
engine, compiler and LoopTune calls carry the caller's trace context as their last argument
(serve/observability/tracing.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle

from optserve.compiler.cost import Objective
from optserve.compiler.function_lists import FunctionLists
from optserve.compiler.interface import CandidateCompiler, Evaluation
from optserve.deadline import ENGINE_ANSWER_TIMEOUT_S, Deadline, as_wall_time
from optserve.engine.interface import Generation, PromptTooLongError, SamplingOptions
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError, unavailable
from optserve.serve.observability import tracing

log = logging.getLogger(__name__)

T = TypeVar("T")


async def call(handle: DeploymentHandle, method: str, *args: Any) -> Any:
    """`handle.method.remote(*args)`'s answer; the deployment's own exception if it raised one."""
    try:
        return await getattr(handle, method).remote(*args)
    except RayTaskError as err:
        cause = err.cause
        while isinstance(cause, RayTaskError):  # raised by a deployment that called another one
            cause = cause.cause
        if not isinstance(cause, BaseException):
            raise
        raise cause from None


def as_service_error(err: BaseException) -> ServiceError:
    """A ServiceError from any layer as it is; Ray's failures as what they mean; anything else INTERNAL."""
    if isinstance(err, ServiceError):
        return err
    if isinstance(err, BackPressureError):
        return ServiceError(ErrorKind.RESOURCE_EXHAUSTED, f"the service is at capacity, retry later ({err})")
    if isinstance(err, DeploymentUnavailableError | RayActorError):
        return ServiceError(ErrorKind.UNAVAILABLE, f"a backend is unavailable, retry later ({err})")
    log.exception("internal error", exc_info=err)
    return ServiceError(ErrorKind.INTERNAL, f"internal error: {type(err).__name__}: {err}")


class EngineClient:
    """The engine deployment (serve/replicas/deployments.PassOrderingEngine).

    A ready model's metadata is kept (it does not change under a running app) until a call to the engine
    fails: the engine may have died, and the next Optimize asks it again, answering UNAVAILABLE quickly
    while its replica is replaced instead of waiting for the new one behind the request's deadline. A call
    refused for backpressure is not such a failure: the engine is alive and busy (one Optimize of a long
    unit fans out several generate calls), so the kept metadata stays and answers a fresh ask meanwhile.
    """

    def __init__(self, handle: DeploymentHandle):
        self.handle = handle
        self._ready_metadata: schemas.ModelMetadata | None = None

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None = None) -> Generation:
        """The engine's candidates; the options' deadline travels as wall-clock time (the replica may be
        another process on another host), so time queued at the engine counts against it."""
        wall_deadline = as_wall_time(options.deadline)
        sent = replace(options, deadline=None)  # a monotonic instant means nothing in the replica
        try:
            return await call(self.handle, "generate", ir, sent, feedback, wall_deadline, tracing.carrier())
        except (PromptTooLongError, BackPressureError):  # the input's fault; a busy engine
            raise
        except Exception:
            self.forget()
            raise

    async def metadata(self, fresh: bool = False) -> schemas.ModelMetadata:
        """The model's metadata; UNAVAILABLE if its engine does not answer (no replica: it is restarting)."""
        if self._ready_metadata is not None and not fresh:
            return self._ready_metadata
        try:
            metadata = await asyncio.wait_for(call(self.handle, "metadata"), ENGINE_ANSWER_TIMEOUT_S)
        except BackPressureError:
            if self._ready_metadata is not None:  # busy, not gone: its router queue is full for a moment
                return self._ready_metadata
            raise
        except TimeoutError:
            raise unavailable(
                f"the pass-ordering engine did not answer within {ENGINE_ANSWER_TIMEOUT_S:g} s (its replica "
                "is starting or being replaced); retry shortly"
            ) from None
        self._ready_metadata = metadata if metadata.ready else None
        return metadata

    def forget(self) -> None:
        self._ready_metadata = None


class CompilerClient(CandidateCompiler):
    """The CompilerWorkers deployment (serve/replicas/deployments.CompilerWorkers)."""

    def __init__(self, handle: DeploymentHandle):
        self.handle = handle

    async def evaluate_async(
        self,
        ir: str,
        pass_lists: Sequence[Sequence[str] | FunctionLists],
        objective: Objective | str,
        want_ir: bool = False,
        want_object: bool = False,
        deadline: Deadline | None = None,
    ) -> list[Evaluation]:
        lists = [p if isinstance(p, FunctionLists) else tuple(p) for p in pass_lists]  # a unit: one job
        wall_deadline = as_wall_time(deadline)  # the replica may be another process on another host
        trace = tracing.carrier()  # the compile batch's span is a child of the caller's
        return await call(
            self.handle, "evaluate", ir, lists, objective, want_ir, want_object, wall_deadline, trace
        )

    async def run_async(self, function: Callable[..., T], *args, deadline: Deadline | None = None) -> T:
        """`function(*args)` in a compiler worker of the deployment (`CompilerPool.run`): its value, or the
        error it raised (the job's own, StoppedError, WorkerCrashedError) raised here."""
        trace = tracing.carrier()
        kind, value = await call(self.handle, "run", function, args, as_wall_time(deadline), trace)
        if kind == "raised":
            raise value
        return value


class LoopTuneClient:
    """The LoopTuneScheduler deployment (serve/replicas/deployments.LoopTuneScheduler)."""

    def __init__(self, handle: DeploymentHandle):
        self.handle = handle

    async def schedule(
        self, request: schemas.ScheduleRequest, deadline: Deadline | None = None
    ) -> schemas.ScheduleResponse:
        """`deadline` (None: none): when the answer must be ready; sent as wall-clock time,
        so the time the request waits in the replica's queue counts against it."""
        return await call(self.handle, "schedule", request, as_wall_time(deadline), tracing.carrier())
