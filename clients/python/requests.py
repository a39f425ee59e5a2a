"""What the Python clients (sync and async) send: requests built from keyword arguments, each call's overall
deadline, and the error a call raises. The clients differ only in how they wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict, Unpack

import grpc
from google.protobuf import json_format

from optserve.objectives import Objective
from optserve.strategies import ServedStrategy
from optserve.v1 import optserve_pb2 as pb

# The server answers its own deadline (best so far, -Oz at worst); the call waits this much longer for it.
DEADLINE_MARGIN_S = 5.0
DEFAULT_TIMEOUT_S = 120.0
SCHEDULE_MARGIN_S = 30.0  # JIT compiling and timing the chosen schedule, after the search's own limit


# How Ray Serve's proxy answers a call whose replica died while it had the call (a killed ingress replica):
# INTERNAL with the actor's death, though the call never ran to an answer and another replica may take it.
REPLICA_DIED = "The actor died unexpectedly before finishing this task."


def replica_died(err: grpc.RpcError) -> bool:
    """Whether an answer is the proxy's INTERNAL for a replica that died with the call: retried as
    UNAVAILABLE is, by the Python client (retry.py) and by optcc (clients/service_call.py)."""
    return err.code() is grpc.StatusCode.INTERNAL and (err.details() or "").startswith(REPLICA_DIED)


class CallError(Exception):
    """The service answered with an error status (after any retries)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message

    @classmethod
    def of(cls, err: grpc.RpcError) -> CallError:
        return cls(err.code(), err.details() or "")


def to_dict(message) -> dict:
    """A response as JSON-ready data, every field present, names as in the .proto file."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


class OptimizeOptions(TypedDict, total=False):
    """The options of Optimize (meanings in proto/optserve/v1/optserve.proto)."""

    objective: str  # instruction_count (default) | text_size
    strategy: str  # greedy (default) | priority | nucleus
    samples: int  # unique model candidates wanted (default 1)
    feedback_rounds: int
    deadline_s: float  # the server's work budget; 0 = its default
    return_ir: bool
    return_object: bool
    bypass_cache: bool
    temperature: float  # nucleus only; default 1.0
    top_p: float  # nucleus only; default 1.0
    seed: int  # nucleus only; the same seed draws the same candidates
    baseline_cost: int  # the cost of the code the caller holds: the service skips -Oz and must beat this
    skip_input_cost: bool  # the input's cost (input_cost) is not compiled: the caller compares on its own
    client_compares: bool  # the caller compiles its own -Oz and keeps the smaller object: no -Oz here
    unit_name: str  # what the unit is called where it came from (its source path): informs `optserve tune`


def optimize_request(ir: str | bytes, **options: Unpack[OptimizeOptions]) -> pb.OptimizeRequest:
    """`ir`: text, or bitcode as bytes."""
    module = {"ir_bitcode": ir} if isinstance(ir, bytes) else {"ir_text": ir}
    fields = dict(options)
    objective = fields.get("objective", Objective.INSTRUCTION_COUNT.value)
    fields["objective"] = pb.Objective.Value(objective.upper())
    fields["strategy"] = pb.Strategy.Value(fields.get("strategy", ServedStrategy.GREEDY.value).upper())
    return pb.OptimizeRequest(**fields, **module)


def optimize_timeout_s(request: pb.OptimizeRequest) -> float | None:
    """The call's deadline when the request names its own (None: the client's default)."""
    return request.deadline_s + DEADLINE_MARGIN_S if request.deadline_s else None


def within_call(request, remaining_s: float):
    """`request` as a retry with `remaining_s` left of its call sends it: an Optimize that names its deadline
    asks the server for no more than fits before the call's deadline, DEADLINE_MARGIN_S kept for the answer
    (half of what is left, when less). A retry asking for the first try's whole budget would end the call
    with DEADLINE_EXCEEDED while the server still works on it."""
    if not isinstance(request, pb.OptimizeRequest) or not request.deadline_s:
        return request
    budget_s = max(remaining_s - DEADLINE_MARGIN_S, remaining_s / 2, 0.001)  # 0 would mean "server default"
    if budget_s >= request.deadline_s:
        return request
    fitted = pb.OptimizeRequest()
    fitted.CopyFrom(request)
    fitted.deadline_s = budget_s
    return fitted


def schedule_request(
    einsum: str,
    sizes: Mapping[str, int],
    method: str = "",
    time_limit_s: float = 0.0,
    measure: bool = True,
    return_kernel: bool = False,
    threads: int = 0,
) -> pb.ScheduleRequest:
    return pb.ScheduleRequest(
        einsum=einsum,
        sizes=dict(sizes),
        method=method,
        time_limit_s=time_limit_s,
        measure=measure,
        return_kernel=return_kernel,
        threads=threads,
    )


def schedule_timeout_s(request: pb.ScheduleRequest) -> float | None:
    return request.time_limit_s + DEADLINE_MARGIN_S + SCHEDULE_MARGIN_S if request.time_limit_s else None
