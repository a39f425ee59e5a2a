"""The request and response models of the API, in pydantic: HTTP bodies and OpenAPI come from these, and
gRPC messages are converted into the same models (serve/edges/codec.py), so both APIs validate one way.

Field meanings are documented once, in proto/optserve/v1/optserve.proto.
"""

from __future__ import annotations

import base64
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    Base64Bytes,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from optserve.objectives import OBJECTIVE_NAMES, Objective
from optserve.strategies import ServedStrategy

if TYPE_CHECKING:  # a type only: the module loads nothing of the compiler
    from optserve.compiler.function_lists import FunctionLists

# The field types: the names as plain strings (a Literal of the enum's values, so requests stay strict).
ObjectiveName = Literal[OBJECTIVE_NAMES]
StrategyName = Literal[tuple(strategy.value for strategy in ServedStrategy)]


class CandidateSource(StrEnum):
    """Where a candidate came from: the proto's `CandidateSource`, lower case (`coreset`: CORESET_LIST)."""

    MODEL = "model"  # drawn from the pass-ordering model
    OZ = "oz"  # the -Oz baseline, always compiled
    CACHE = "cache"  # answered from the result cache
    CORESET = "coreset"  # a list of the bundled coreset
    PER_FUNCTION = "per_function"  # a pass list per function of a whole unit
    CLIENT_BASELINE = "client_baseline"  # the code the client holds (`baseline_cost`), not compiled here
    TUNED = "tuned"  # the tuning store's lists for this unit or its functions (`optserve tune` found them)


SourceName = Literal[tuple(source.value for source in CandidateSource)]
# Raw bytes inside the service, base64 text in JSON (responses only: requests use pydantic's Base64Bytes).
Base64Out = Annotated[
    bytes,
    PlainSerializer(lambda data: base64.b64encode(data).decode("ascii"), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "contentEncoding": "base64"}),
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Request(_Model):
    """A request body: what the OpenAPI calls an integer or a boolean is taken as one, not coerced from
    strings, floats or 0/1 (JSON integers still count as numbers)."""

    model_config = ConfigDict(strict=True)


UINT32_MAX = 2**32 - 1  # the proto's uint32: HTTP takes no more than gRPC can carry
INT32_MAX = 2**31 - 1  # the proto's int32

# Constraints the OpenAPI states but the flow checks itself, with messages that name the problem (the gRPC
# path runs the same checks): exactly one of `ir` and `ir_bitcode` set, not null, and several samples only for
# the strategies that draw several (serve/optimize/optimizer.py); the einsum's shape and positive sizes
# (kernels/spec.py). The settings' limits are added by serve/edges/openapi.py. The examples are what /docs
# shows and what schemathesis sends first: requests that succeed, so the answers' schemas get checked too.
_EXAMPLE_IR = "define i32 @add(i32 %a, i32 %b) {\n  %sum = add nsw i32 %a, %b\n  ret i32 %sum\n}\n"
# IR text as compiler/ir.py's parse_ir takes it: something besides whitespace (Python's, what str.strip()
# strips: \s and \x1c-\x1f, \x85), and no NUL.
IR_TEXT_SCHEMA = {"type": "string", "minLength": 1, "pattern": r"^[^\x00]*[^\s\x00\x1c-\x1f\x85][^\x00]*$"}
_OPTIMIZE_REQUEST_SCHEMA = {
    "oneOf": [
        {"required": ["ir"], "properties": {"ir": IR_TEXT_SCHEMA}},
        {"required": ["ir_bitcode"], "properties": {"ir_bitcode": {"type": "string", "minLength": 1}}},
    ],
    "anyOf": [
        {
            "required": ["strategy"],
            "properties": {
                "strategy": {"enum": [s.value for s in ServedStrategy if s != ServedStrategy.GREEDY]}
            },
        },
        {"properties": {"samples": {"const": 1}}},
    ],
    "examples": [{"ir": _EXAMPLE_IR, "strategy": "priority", "samples": 2, "deadline_s": 10}],
}
# The einsum as kernels/spec.py parses it: OUT[i,j] += IN1[i+k,...] * IN2[...], every dimension an index
# name (a sum of names on the inputs), so `A[]` or `A[1]` is refused by the schema as by the server.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_INDEX = rf"\s*{_NAME}\s*"
_SUM = rf"{_INDEX}(\+{_INDEX})*"
_OUTPUT = rf"\s*{_NAME}\s*\[{_INDEX}(,{_INDEX})*\]\s*"
_TENSOR = rf"\s*{_NAME}\s*\[{_SUM}(,{_SUM})*\]\s*"
EINSUM_SCHEMA = {"pattern": rf"^{_OUTPUT}\+={_TENSOR}\*{_TENSOR}$", "maxLength": 1000}
SIZES_SCHEMA = {
    "minProperties": 1,
    "propertyNames": {"pattern": rf"^{_NAME}$"},  # the einsum's index names
    "additionalProperties": {"type": "integer", "minimum": 1},
}
_SCHEDULE_REQUEST_SCHEMA = {
    "examples": [
        {
            "einsum": "C[m,n] += A[m,k] * B[k,n]",
            "sizes": {"m": 64, "k": 64, "n": 64},
            "method": "greedy1",
            "time_limit_s": 2,
        }
    ]
}


class OptimizeRequest(_Request):
    model_config = ConfigDict(json_schema_extra=_OPTIMIZE_REQUEST_SCHEMA)

    ir: str | None = Field(None, description="textual LLVM IR of one module")
    # Not strict: base64 text is what this field takes (as bytes once decoded).
    ir_bitcode: Base64Bytes | None = Field(
        None, strict=False, description="LLVM bitcode, base64 (instead of `ir`)"
    )
    objective: ObjectiveName = Objective.INSTRUCTION_COUNT.value
    strategy: StrategyName = ServedStrategy.GREEDY.value
    samples: int = Field(
        1, ge=1, description="unique model candidates wanted; more than 1: priority or nucleus only"
    )
    feedback_rounds: int = Field(0, ge=0, description="compiler-feedback retries")
    deadline_s: float | None = Field(None, gt=0, description="wall-clock budget; None = server default")
    return_ir: bool = False
    return_object: bool = False
    bypass_cache: bool = False
    temperature: float = Field(1.0, gt=0, le=10, description="nucleus only")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus only")
    seed: int = Field(0, ge=0, le=UINT32_MAX, description="nucleus only")
    # Absent = -Oz is the baseline; documented as a plain integer (no null: leave it out instead).
    baseline_cost: Annotated[
        int | None, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": INT32_MAX})
    ] = Field(
        None,
        gt=0,
        le=INT32_MAX,
        description="the cost of the client's own code (text_size: its compiler's .text bytes): -Oz is not "
        "compiled, the best answer is never worse than this; absent = -Oz is the baseline",
    )

    skip_input_cost: bool = Field(
        False,
        description="do not compile the unoptimized input (input_cost -1): for a client that compares the "
        "answer with its own compiler's object itself; implied by baseline_cost",
    )
    client_compares: bool = Field(
        False,
        description="the client compiles its own -Oz object and keeps the smaller of it and the answer's: "
        "no -Oz is compiled here; the baseline is the client's (cost baseline_cost, or -1: not measured "
        "here) and best is the cheapest candidate compiled, or that baseline",
    )
    unit_name: str = Field(
        "",
        max_length=4096,
        description="what the unit is called where it came from (optcc: its source "
        "path): shown by `optserve tune`, never part of a key",
    )

    @field_validator("baseline_cost", mode="before")
    @classmethod
    def _no_null_baseline(cls, value):
        if value is None:  # runs for a given value only: the default (absent) stays None
            raise ValueError("give a positive integer, or leave the field out for -Oz as the baseline")
        return value

    @model_validator(mode="after")
    def _one_module(self) -> OptimizeRequest:
        if (self.ir is None) == (self.ir_bitcode is None):
            raise ValueError("give exactly one of `ir` (text) and `ir_bitcode` (base64 bitcode)")
        return self

    @property
    def module_bytes(self) -> bytes:
        return self.ir_bitcode if self.ir_bitcode is not None else self.ir.encode("utf-8")


class Candidate(_Model):
    pipeline: str = Field(description="pass list in `opt -passes=` syntax")
    passes: list[str] = Field(description="pass list in optserve's list form")
    cost: int = Field(description="objective after the pass list; -1 if it failed")
    logprob: float = Field(0.0, description="model log-probability; 0 for -Oz")
    source: SourceName
    error: str = ""
    function_passes: dict[str, str] = Field(
        default_factory=dict,
        description="source per_function: each function's pass list (text form); pipeline and passes are "
        "then empty, the lists apply to the unit's functions one by one",
    )
    # Inside the service only, never on the wire: what a per-function candidate compiles with (its
    # function_passes are their text). The Optimize flow ranks these (serve/optimize/ranking.py).
    _function_lists: FunctionLists | None = PrivateAttr(None)

    def hold_function_lists(self, function_lists: FunctionLists | None) -> None:
        """Keep the lists it compiles with (serve/optimize/ranking.py `measured`); they are not sent."""
        self._function_lists = function_lists

    @property
    def job(self) -> tuple[str, ...] | FunctionLists:
        """What the compiler compiles to reproduce this candidate: its pass list or its FunctionLists."""
        return self._function_lists or tuple(self.passes)


class Timings(_Model):
    total_s: float = 0.0
    validate_s: float = 0.0
    sample_s: float = 0.0
    compile_s: float = 0.0


class TuningStoreHits(_Model):
    """The tuning store's part in an answer: a whole-unit entry, or entries of some of its functions."""

    unit_hit: bool = Field(False, description="the whole unit was tuned before: its entry is the candidate")
    function_hits: int = Field(0, description="functions whose lists the store held (without a unit entry)")
    functions: int = Field(0, description="functions the unit was split into (0: not split)")
    recorded: bool = Field(False, description="the unit was new to the store and is now recorded for tuning")
    settled: bool = Field(
        False,
        description="the unit was tuned (or the store is a read-only profile): the answer stands until "
        "tuning goes further; a client's object cache keeps only such answers",
    )


class OptimizeResponse(_Model):
    ir_sha256: str
    objective: ObjectiveName
    input_cost: int
    oz_cost: int = Field(description="-1 if not finished (oz_skipped) or, as a candidate, failed to compile")
    candidates: list[Candidate] = Field(
        description="ranked best first; the baseline (-Oz, or the request's baseline_cost) always among them"
    )
    best: Candidate = Field(description="never worse than the baseline")
    improvement_over_oz_pct: float = Field(
        description="of best over the baseline: -Oz, or the request's baseline_cost"
    )
    timings: Timings
    model_id: str
    model_version: str
    deadline_hit: bool = False
    cached: bool = False
    optimized_ir: str | None = None
    object_code: Base64Out | None = None
    warning: str = ""
    oz_skipped: bool = Field(
        False,
        description="the request gave baseline_cost (the baseline) and the deadline came before -Oz's "
        "compile finished: -Oz is not among the candidates (oz_cost -1); always false without baseline_cost",
    )
    tuning: TuningStoreHits = Field(
        default_factory=TuningStoreHits, description="what the tuning store held for this unit"
    )


class ModelMetadata(_Model):
    name: str
    version: str
    backend: str
    platform: str
    ready: bool
    reason: str = ""
    strategies: list[StrategyName]
    max_samples: int
    max_feedback_rounds: int
    max_ir_bytes: int


class ScheduleRequest(_Request):
    model_config = ConfigDict(json_schema_extra=_SCHEDULE_REQUEST_SCHEMA)

    einsum: str = Field(
        description='tensor contraction, e.g. "C[m,n] += A[m,k] * B[k,n]"', json_schema_extra=EINSUM_SCHEMA
    )
    sizes: dict[str, int] = Field(
        description="size of every index of the einsum, e.g. {m: 128, k: 64, n: 256}",
        json_schema_extra=SIZES_SCHEMA,
    )
    method: str | None = Field(None, description="search or policy; None = server default")
    time_limit_s: float | None = Field(None, gt=0)
    measure: bool = True
    return_kernel: bool = False
    threads: int | None = Field(
        None, ge=1, description="threads the kernel may run on; None = the deployment's CPUs"
    )


class Loop(_Model):
    index: str
    size: int
    tail: int = 0


class ScheduleResponse(_Model):
    schedule: str
    loops: list[Loop] = Field(description="the compute nest, outermost first (order and splits)")
    actions: list[str]
    gflops: float
    base_gflops: float = Field(
        description="the nest in its given order; 0 when the quick decision did not time it"
    )
    measured: bool
    seconds: float
    method: str
    kernel_ir: str | None = None
    timed_out: bool = False
    evaluations: int = 0
    threads: int = Field(1, description="threads the chosen kernel runs on (fewer where the work is small)")
    timed_sizes: dict[str, int] = Field(
        default_factory=dict,
        description="sizes the candidates were timed on: the request's, or a sub-problem's where it is large",
    )
    cached: bool = Field(
        False,
        description="answered from the decision cache, the replica's memory or the tuning store (the same "
        "contraction, sizes, method, threads and CPU model decided before, by any replica): nothing searched",
    )


class ErrorBody(_Model):
    code: str = Field(description="gRPC status name, e.g. INVALID_ARGUMENT")
    message: str


class ErrorResponse(_Model):
    error: ErrorBody


# --- KServe v2-style health and model metadata ---------------------------------------------------------


class ServerMetadata(_Model):
    name: str
    version: str
    extensions: list[str]


class Liveness(_Model):
    live: bool


class Readiness(_Model):
    ready: bool
    parts: dict[str, str] = Field(description='per part (model, compiler, looptune): "ready" or why not')


class TensorMetadata(_Model):
    name: str
    datatype: str
    shape: list[int]


class KServeModelMetadata(_Model):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]
    ready: bool
    reason: str = ""


class ModelReadiness(_Model):
    name: str
    ready: bool
    reason: str = ""
