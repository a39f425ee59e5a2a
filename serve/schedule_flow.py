"""The Schedule flow: validate the loop nest -> search or policy -> response.

Loop kernels are only ever generated from a `LoopNestSpec` that passed `LoopNestSpec.parse` (names, sizes,
memory and flop limits from the LoopTune settings), with the search time bounded by the same settings.
"""

from __future__ import annotations

from optserve.config import Settings
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.policies.methods import SearchMethod
from optserve.serve import schemas
from optserve.serve.errors import invalid

DEFAULT_METHOD = SearchMethod.POLICY_TILES  # learned tile cover + the Q-policy, within the polish budget
DEFAULT_TIME_LIMIT_S = 10.0


def schedule(request: schemas.ScheduleRequest, settings: Settings) -> schemas.ScheduleResponse:
    """Choose a schedule for the request's loop nest (blocking: run it off the event loop)."""
    from optserve.policies.scheduler import schedule_nest

    limits = settings.looptune
    time_limit_s = request.time_limit_s or min(DEFAULT_TIME_LIMIT_S, limits.search_time_limit_s)
    method = request.method or DEFAULT_METHOD
    try:
        spec = LoopNestSpec.parse(request.einsum, request.sizes, limits)
        result = schedule_nest(
            spec,
            method=method,
            time_limit_s=time_limit_s,
            measure=request.measure,
            emit_ir=request.return_kernel,
            settings=limits,
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
    )
