"""The one seam between the service and the compiler: `CandidateCompiler`, and the types that cross it.

`CompilerPool` (compiler/workers.py) implements it over crash-isolated worker processes; the service reaches
it through a Ray deployment handle with the same methods (`CompilerClient`, serve/replicas/handles.py). The
Optimize flow, the compiler-feedback loop and the per-function search never learn which one is behind it.

What the service asks of the compiler, all through this seam:
- compile and measure candidates (`evaluate_async`): a pass list, or a `FunctionLists` for a whole unit
  (compiler/function_lists.py), under an `Objective` (compiler/cost.py); one `Evaluation` each;
- run one of the compiler's functions where LLVM may crash (`run_async`): the intake's parse and verify
  (`compiler.ir.parse_ir`), the splits (`compiler.ir.split_functions`, `compiler.function_lists.split_unit`),
  and the tuning store's keys and toolchain (`tuning.unit_keys.unit_keys`, `tuning.keys.current_toolchain`);
- read why an Evaluation failed: LLVM refused the input (`llvm_failure`), the worker was killed from outside
  (`killed_from_outside`), or the deadline came first (`cut_by_deadline`).

This module loads no LLVM: the ingress holds these types (tests/contracts/test_ingress_loads_no_llvm.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from optserve.compiler.cost import Objective
    from optserve.deadline import Deadline

T = TypeVar("T")


class PerFunctionJob(Protocol):
    """A whole unit compiled with a pass list per function, as one job: what
    `compiler.function_lists.FunctionLists` is, named here by its shape (that module imports this one, and
    the seam imports nothing back)."""

    @property
    def lists(self) -> tuple[tuple[str, tuple[str, ...]], ...]: ...  # (function name, pass list)

    @property
    def default(self) -> tuple[str, ...]: ...  # for the functions not named

    @property
    def cleanup(self) -> tuple[str, ...]: ...  # on the linked unit

    @property
    def grouped(self) -> bool: ...

    def for_function(self, name: str) -> tuple[str, ...]: ...


# What one Evaluation measures: a pass list for the whole unit, or a pass list per function.
CompileJob = Sequence[str] | PerFunctionJob


class Outcome(StrEnum):
    """How a candidate's compile ended (also the label of the service's compile metrics)."""

    OK = "ok"
    ERROR = "error"  # the compiler refused: bad IR or pass list, LLVM's own error
    CRASH = "crash"  # the worker process died (compiler/workers.py)
    TIMEOUT = "timeout"  # it overran the pool's time limit
    DEADLINE = "deadline"  # the call's deadline came before it started or while it compiled


@dataclass(frozen=True)
class Evaluation:
    """One candidate's outcome: cost under the objective, or the error that stopped it (`outcome` says
    which kind; None when made: OK without an error, ERROR with one)."""

    pass_list: tuple[str, ...]
    cost: int | None
    error: str | None
    seconds: float
    optimized_ir: str | None = None
    object_code: bytes | None = None
    outcome: Outcome | None = None

    def __post_init__(self):
        if self.outcome is None:
            object.__setattr__(self, "outcome", Outcome.OK if self.error is None else Outcome.ERROR)

    @property
    def ok(self) -> bool:
        return self.error is None


# A crashed candidate's error ends with what LLVM wrote on the worker's stderr before it ended, after this.
LLVM_SAYS = "LLVM said: "


def llvm_failure(evaluation: Evaluation) -> str | None:
    """LLVM's own message when LLVM itself refused or aborted on this candidate's module: an error it raised
    (outcome "error"), or a worker it ended with an error or a failed assertion on stderr. That is a failure
    of the input, which the same request would meet again (the service answers it INVALID_ARGUMENT). None
    otherwise: success, a worker killed from outside or with nothing said, a timeout, a deadline."""
    if evaluation.outcome is Outcome.ERROR:
        return evaluation.error
    if evaluation.outcome is Outcome.CRASH and LLVM_SAYS in evaluation.error:
        return evaluation.error.split(LLVM_SAYS, 1)[1]
    return None


def killed_from_outside(evaluation: Evaluation) -> bool:
    """Whether this candidate's worker was SIGKILLed with nothing said by LLVM: an operator, the memory
    limit's enforcer, a replica going down; not the input's fault, and a retry may well succeed."""
    error = evaluation.error or ""
    return evaluation.outcome is Outcome.CRASH and "SIGKILL" in error and LLVM_SAYS not in error


def cut_by_deadline(evaluations: Sequence[Evaluation]) -> bool:
    """Whether the call's deadline left any of these candidates unmeasured."""
    return any(e.outcome is Outcome.DEADLINE for e in evaluations)


class WorkerCrashedError(RuntimeError):
    """A worker died running a job (`run_async`): LLVM aborted or crashed on its input, or the process
    was killed from outside. `llvm_said`: LLVM's own last message, when it left one (then the input is at
    fault); `signal_name`: the signal that ended it, if one did."""

    def __init__(self, message: str, llvm_said: str = "", signal_name: str = ""):
        super().__init__(message)
        self.llvm_said = llvm_said
        self.signal_name = signal_name

    @property
    def killed_from_outside(self) -> bool:
        """SIGKILL with nothing said: the memory limit's enforcer, an operator, a replica going down."""
        return self.signal_name == "SIGKILL" and not self.llvm_said


class CandidateCompiler(Protocol):
    """What compiles and measures candidates for the feedback loop and the service: a `CompilerPool`, or the
    service's handle to its CompilerWorkers deployment (serve/replicas/handles.py)."""

    async def evaluate_async(
        self,
        ir: str | bytes,
        pass_lists: Sequence[CompileJob],
        objective: Objective | str,
        want_ir: bool = False,
        want_object: bool = False,
        deadline: Deadline | None = None,
    ) -> list[Evaluation]:
        """One Evaluation per job (a pass list, or a `PerFunctionJob` for the whole unit), in order; a
        candidate that crashed or overran has `error` set and its `outcome` says which.

        `deadline`: candidates not finished by then are stopped or never started, and come back with
        outcome DEADLINE. `ir`: IR text as `compiler.ir.parse_ir` gives it, or a unit's bytes as a client
        sent them (read where it is compiled: `compiler.ir.compile_input`)."""
        ...

    async def run_async(self, function: Callable[..., T], *args, deadline: Deadline | None = None) -> T:
        """`function(*args)` in a worker process (a module-level function of the project: it is pickled by
        name): its value, or the exception it raised; `WorkerCrashedError` if the worker died,
        `StoppedError` (optserve/deadline.py) once `deadline` (or the pool's time limit) came first."""
        ...
