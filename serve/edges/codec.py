"""Protobuf messages <-> the pydantic models in serve/schemas.py (the gRPC edge).

Proto3 has no "unset" for scalars: a zero means "the default" wherever the proto says so.
"""

from __future__ import annotations

from pydantic import ValidationError

from optserve.serve import schemas
from optserve.serve.errors import invalid
from optserve.v1 import optserve_pb2 as pb


def _enum_name(enum_type, value: int, default: str) -> str:
    if value not in enum_type.values():  # proto3 keeps unknown enum numbers: refuse them clearly
        raise invalid(f"{enum_type.DESCRIPTOR.name.lower()}: unknown value {value}")
    name = enum_type.Name(value)
    return default if name.endswith("_UNSPECIFIED") else name.lower()


def _validated(model: type, fields: dict):
    try:
        return model.model_validate(fields)
    except ValidationError as err:
        raise invalid(validation_message(err)) from None


def validation_message(err: ValidationError) -> str:
    """One line per problem, naming the field: what a caller needs to fix the request."""
    lines = []
    for problem in err.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "request"
        lines.append(f"{where}: {problem['msg']}")
    return "; ".join(lines)


def optimize_request(message: pb.OptimizeRequest) -> schemas.OptimizeRequest:
    which = message.WhichOneof("module")
    if which is None:
        raise invalid("no module: set `ir_text` or `ir_bitcode`")
    if message.deadline_s < 0:
        raise invalid("deadline_s: must be positive (0 = server default)")
    options = {
        "objective": _enum_name(pb.Objective, message.objective, schemas.Objective.INSTRUCTION_COUNT.value),
        "strategy": _enum_name(pb.Strategy, message.strategy, schemas.ServedStrategy.GREEDY.value),
        "samples": message.samples or 1,
        "feedback_rounds": message.feedback_rounds,
        "deadline_s": message.deadline_s or None,
        "return_ir": message.return_ir,
        "return_object": message.return_object,
        "bypass_cache": message.bypass_cache,
        "temperature": message.temperature or 1.0,
        "top_p": message.top_p or 1.0,
        "seed": message.seed,
        "skip_input_cost": message.skip_input_cost,
        "client_compares": message.client_compares,
        "unit_name": message.unit_name,
    }
    if message.HasField("baseline_cost"):  # proto3 `optional`: unset = -Oz; a zero given is refused
        options["baseline_cost"] = message.baseline_cost
    # Validate the options with a placeholder module, then attach the real one: bitcode arrives raw over
    # gRPC, while the pydantic field expects base64 (its JSON form).
    checked = _validated(schemas.OptimizeRequest, options | {"ir": ""})
    if which == "ir_text":
        return checked.model_copy(update={"ir": message.ir_text})
    return checked.model_copy(update={"ir": None, "ir_bitcode": message.ir_bitcode})


# Proto enum values share one scope per package: source `coreset` is CORESET_LIST (CORESET is a Strategy).
_SOURCE_ENUM_NAMES = {schemas.CandidateSource.CORESET: "CORESET_LIST"}


def _candidate(candidate: schemas.Candidate) -> pb.Candidate:
    return pb.Candidate(
        pipeline=candidate.pipeline,
        passes=candidate.passes,
        cost=candidate.cost,
        logprob=candidate.logprob,
        source=pb.CandidateSource.Value(_SOURCE_ENUM_NAMES.get(candidate.source, candidate.source.upper())),
        error=candidate.error,
        function_passes=candidate.function_passes,
    )


def optimize_response(response: schemas.OptimizeResponse) -> pb.OptimizeResponse:
    return pb.OptimizeResponse(
        ir_sha256=response.ir_sha256,
        objective=pb.Objective.Value(response.objective.upper()),
        input_cost=response.input_cost,
        oz_cost=response.oz_cost,
        candidates=[_candidate(c) for c in response.candidates],
        best=_candidate(response.best),
        improvement_over_oz_pct=response.improvement_over_oz_pct,
        timings=pb.Timings(**response.timings.model_dump()),
        model_id=response.model_id,
        model_version=response.model_version,
        deadline_hit=response.deadline_hit,
        cached=response.cached,
        optimized_ir=response.optimized_ir or "",
        object_code=response.object_code or b"",
        warning=response.warning,
        oz_skipped=response.oz_skipped,
        tuning=pb.TuningStoreHits(**response.tuning.model_dump()),
    )


def model_metadata(metadata: schemas.ModelMetadata) -> pb.ModelMetadata:
    return pb.ModelMetadata(**metadata.model_dump())


def schedule_request(message: pb.ScheduleRequest) -> schemas.ScheduleRequest:
    return _validated(
        schemas.ScheduleRequest,
        {
            "einsum": message.einsum,
            "sizes": dict(message.sizes),
            "method": message.method or None,
            "time_limit_s": message.time_limit_s or None,
            "measure": message.measure,
            "return_kernel": message.return_kernel,
            "threads": message.threads or None,
        },
    )


def schedule_response(response: schemas.ScheduleResponse) -> pb.ScheduleResponse:
    fields = response.model_dump()
    fields["loops"] = [pb.Loop(**loop) for loop in fields["loops"]]
    fields["kernel_ir"] = fields["kernel_ir"] or ""
    return pb.ScheduleResponse(**fields)
