"""Compiler-feedback retry (thesis ch. 5, "Fast Feedback"): compile the candidates, tell the model how they
did, and ask again.

Feedback for each candidate: whether the pass list is valid, the instruction counts the model predicted
before and after against the compiler's actual counts, and the compile error if there was one. The text is
appended to the prompt (the profile's `feedback_template` says where) for the next round; rounds stop after
`rounds` retries or as soon as a round adds no new pass list. `generate_with_feedback` is the one loop: the
service runs it (with its deadline), and so do the tests and `benchmarks/engine_feedback.py`. Every count
comes from the compiler (the candidates' evaluations, and the input's count from a compiler worker), so the
loop loads no LLVM where it runs: the service's ingress (tests/serve/test_serve_ingress_llvm.py).

The thesis fine-tuned its model on feedback examples before it could use them; a model that never saw
feedback in training treats the text as extra prompt. `optserve.passlm.feedback_examples` builds such
examples from a model's own outputs; docs/bench/engine.md compares feedback with priority sampling at an
equal compile budget, for the bundled model and a feedback fine-tune.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from optserve.compiler.cost import Objective
from optserve.compiler.interface import CandidateCompiler, Evaluation, Outcome, WorkerCrashedError
from optserve.compiler.ir import IRError, instruction_count
from optserve.compiler.passes import format_pass_list
from optserve.deadline import Deadline, StoppedError
from optserve.engine.interface import Candidate, Engine, Generation, PromptTooLongError, SamplingOptions

T = TypeVar("T")


def build_feedback(
    measured: Iterable[tuple[Candidate, Evaluation]],
    objective: Objective | str = Objective.INSTRUCTION_COUNT,
    actual_before: int | None = None,
) -> str:
    """The feedback text of one round for the candidates of that round and their evaluations.

    The costs the model predicted are in the objective's unit (its answers were trained so: instructions, or
    bytes of `.text`). `actual_before`: the input's instruction count (`compiler.ir.instruction_count`;
    None: not counted), shown for objective instruction_count; the unoptimized `.text` size is not measured,
    so for text_size only its prediction is shown.
    """
    objective = Objective(objective)
    lines = []
    for candidate, evaluation in measured:
        lines.append(f"pass list: {format_pass_list(candidate.pass_list) or '(none)'}")
        if evaluation.error:
            lines.append(f"valid: no ({evaluation.error})")
            continue
        lines.append("valid: yes")
        if objective is Objective.INSTRUCTION_COUNT:
            lines.append(f"instructions before: {_versus(candidate.predicted_cost_before, actual_before)}")
            lines.append(f"instructions after: {_versus(candidate.predicted_cost_after, evaluation.cost)}")
        else:
            name = objective.value
            lines.append(f"{name} before: predicted {_or_none(candidate.predicted_cost_before)}")
            lines.append(f"{name} after: {_versus(candidate.predicted_cost_after, evaluation.cost)}")
    return "\n".join(lines) + "\n"


def _versus(predicted: int | None, actual: int | None) -> str:
    verdict = (
        "" if predicted is None or actual is None else (" (correct)" if predicted == actual else " (wrong)")
    )
    return f"predicted {_or_none(predicted)}, actual {_or_none(actual)}{verdict}"


def _or_none(value: int | None) -> str:
    return "none" if value is None else str(value)


@dataclass
class FeedbackRound:
    feedback: str | None  # the feedback text this round's prompt carried (None in the first round)
    generation: Generation
    new: list[tuple[Candidate, Evaluation]]  # candidates no earlier round compiled, with their evaluations


@dataclass
class FeedbackResult:
    rounds: list[FeedbackRound] = field(default_factory=list)
    deadline_hit: bool = False  # the deadline (or the engine's own) stopped the rounds
    prompt_too_long: str | None = None  # the prompt (with its feedback) did not fit: why; the rounds stopped
    sample_s: float = 0.0  # time spent waiting for the engine
    compile_s: float = 0.0  # time spent waiting for the compiler

    @property
    def measured(self) -> list[tuple[Candidate, Evaluation]]:
        return [pair for round_ in self.rounds for pair in round_.new]

    @property
    def compilations(self) -> int:
        return len(self.measured)

    def best(self) -> tuple[Candidate, Evaluation] | None:
        scored = [pair for pair in self.measured if pair[1].cost is not None]
        return min(scored, key=lambda pair: pair[1].cost) if scored else None


async def generate_with_feedback(
    engine: Engine,
    compiler: CandidateCompiler,
    ir: str,
    options: SamplingOptions,
    rounds: int,
    objective: Objective | str = Objective.INSTRUCTION_COUNT,
    *,
    deadline: Deadline | None = None,
    grace_s: float = 0.0,
    exclude: Iterable[tuple[str, ...]] = (),
    feedback_options: SamplingOptions | None = None,
    per_round: int | None = None,
) -> FeedbackResult:
    """Up to 1 + `rounds` generations, each round's new candidates compiled and fed back to the next.

    This is the loop the service runs (serve/optimize/optimizer.py). A round's new candidates are those no
    earlier round compiled and not in `exclude` (the service's -Oz, compiled beside). The rounds stop after
    `rounds` retries, at a round that adds nothing, at `deadline` (each generation is told the time left, the
    compiler stops the round's compiles at it and the candidates it cut are left out, and a backend gets
    `grace_s` more to answer before it is cancelled), or when the prompt no longer fits the model
    (`PromptTooLongError`: recorded, not raised). A benchmark may ask the feedback rounds for other options
    than the first (`feedback_options`) and compile only a round's first `per_round` new lists.
    """
    result = FeedbackResult()
    backend_stop = None if deadline is None else deadline.extended(grace_s)  # when a backend is cancelled
    seen: set[tuple[str, ...]] = set(exclude)
    feedback = None
    actual_before, counted = None, False  # the input's instruction count, asked once
    for round_index in range(rounds + 1):
        round_options = options if round_index == 0 or feedback_options is None else feedback_options
        started = time.monotonic()
        if deadline is not None:
            if deadline.passed():
                result.deadline_hit = True
                break
            round_options = replace(round_options, deadline=deadline)
        try:
            generation = await _by(backend_stop, engine.generate(ir, round_options, feedback), "sampling")
        except PromptTooLongError as err:
            result.prompt_too_long = str(err)
            break
        except StoppedError:
            result.deadline_hit = True
            break
        finally:
            result.sample_s += time.monotonic() - started
        fresh = [c for c in generation.candidates if c.pass_list not in seen][:per_round]
        seen.update(c.pass_list for c in fresh)
        if fresh:
            started = time.monotonic()
            try:
                compiling = compiler.evaluate_async(
                    ir, [c.pass_list for c in fresh], objective, deadline=deadline
                )
                evaluations = await _by(backend_stop, compiling, "compiling candidates")
            except StoppedError:
                result.deadline_hit = True
                break
            finally:
                result.compile_s += time.monotonic() - started
            # candidates the deadline cut were never measured: left out, and the rounds end
            new = [
                pair
                for pair in zip(fresh, evaluations, strict=True)
                if pair[1].outcome is not Outcome.DEADLINE
            ]
            if new:
                result.rounds.append(FeedbackRound(feedback, generation, new))
            if len(new) < len(fresh):
                result.deadline_hit = True
                break
        if generation.deadline_hit:
            result.deadline_hit = True
            break
        if not fresh or round_index == rounds:
            break
        if not counted:  # the input's count, once, for the first feedback
            counting = _input_instructions(compiler, ir, objective, deadline)
            try:
                actual_before = await _by(backend_stop, counting, "counting instructions")
            except StoppedError:
                result.deadline_hit = True
                break
            counted = True
        feedback = build_feedback(new, objective, actual_before)
    return result


async def _by(stop: Deadline | None, work: Awaitable[T], what: str) -> T:
    """`work`'s answer; StoppedError if `stop` (None: no deadline) passes first."""
    return await (work if stop is None else stop.within(work, what))


async def _input_instructions(
    compiler: CandidateCompiler, ir: str, objective: Objective | str, deadline: Deadline | None
) -> int | None:
    """The input's instruction count for the feedback text, counted in a compiler worker (the loop's own
    process, the service's ingress, loads no LLVM); None for another objective or when LLVM cannot count."""
    if Objective(objective) is not Objective.INSTRUCTION_COUNT:
        return None
    try:
        return await compiler.run_async(instruction_count, ir, deadline=deadline)
    except (IRError, WorkerCrashedError):
        return None
