"""The Schedule flow: validate the loop nest -> search or policy -> response.

Loop kernels are only ever generated from a `LoopNestSpec` that passed `LoopNestSpec.parse` (names, sizes
and memory limits from the LoopTune settings; no size is refused for the search's cost), on the request's
threads (default: the deployment's CPUs), with the search time bounded by the same settings and,
for a gRPC call, by the call's deadline: the search's time limit is cut so that the answer is ready by then
(the best schedule found in time, `timed_out: true` when the search was cut).
"""

from __future__ import annotations

from optserve.config import Settings
from optserve.deadline import SEARCH_SHARE, Deadline
from optserve.kernels.spec import SpecError
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError, invalid


def time_limit_within(asked_s: float, deadline: Deadline | None, max_s: float) -> float:
    """The search's time limit: `asked_s`, cut to SEARCH_SHARE of what is left before `deadline` (None: no
    deadline). A limit over `max_s` is left as asked, to be refused as such; a deadline
    already passed is DEADLINE_EXCEEDED before any work (the caller is gone)."""
    if deadline is None or asked_s > max_s:
        return asked_s
    if deadline.passed():
        raise ServiceError(ErrorKind.DEADLINE_EXCEEDED, "the call's deadline passed before the search began")
    return min(asked_s, deadline.share(SEARCH_SHARE).remaining_s())


def schedule(
    request: schemas.ScheduleRequest, settings: Settings, deadline: Deadline | None = None
) -> schemas.ScheduleResponse:
    """Choose a schedule for the request's loop nest (blocking: run it off the event loop), done by
    `deadline` if one is given (the gRPC call's, less what its answer needs to get back)."""
    from optserve.policies.decision_cache import shared_decision_cache
    from optserve.policies.scheduler import default_time_limit_s, schedule_contraction

    limits = settings.looptune
    asked_s = request.time_limit_s or default_time_limit_s(limits)
    time_limit_s = time_limit_within(asked_s, deadline, limits.search_time_limit_s)
    try:
        result = schedule_contraction(
            request.einsum,
            request.sizes,
            limits,
            method=request.method,
            time_limit_s=time_limit_s,
            measure=request.measure,
            emit_ir=request.return_kernel,
            threads=request.threads,
            cache=shared_decision_cache(),  # a repeated shape is answered without search
        )
    except SpecError as err:
        raise invalid(str(err)) from None
    return schemas.ScheduleResponse(
        schedule=result.schedule,
        loops=[schemas.Loop(**loop) for loop in result.loops],
        actions=result.actions,
        gflops=result.gflops or 0.0,
        base_gflops=result.base_gflops or 0.0,
        measured=result.gflops is not None,
        seconds=result.seconds,
        method=result.method,
        kernel_ir=result.llvm_ir,
        timed_out=result.timed_out,
        evaluations=result.evaluations,
        threads=result.threads,
        timed_sizes=result.timed_sizes or {},
        cached=result.cached,
    )
