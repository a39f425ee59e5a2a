"""Compiler-feedback retry (thesis ch. 5, "Fast Feedback"): compile the candidates, tell the model how they
did, and ask again.

Feedback for each candidate: whether the pass list is valid, the instruction counts the model predicted
before and after against the compiler's actual counts, and the compile error if there was one. The text is
appended to the prompt (the profile's `feedback_template` says where) for the next round; rounds stop after
`rounds` retries or as soon as a round adds no new pass list.

The thesis fine-tuned its model on feedback examples before it could use them; a model that never saw
feedback in training treats the text as extra prompt. `optserve.passlm.feedback_examples` builds such
examples from a model's own outputs; docs/bench/engine.md compares feedback with priority sampling at an
equal compile budget, for the bundled model and a feedback fine-tune.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from optserve.compiler.cost import Objective
from optserve.compiler.ir import IRError, instruction_count
from optserve.compiler.passes import format_pass_list
from optserve.compiler.pipeline import Evaluation
from optserve.engine.interface import Candidate, Engine, Generation, SamplingOptions


def build_feedback(
    ir: str,
    measured: Iterable[tuple[Candidate, Evaluation]],
    objective: Objective | str = Objective.INSTRUCTION_COUNT,
) -> str:
    """The feedback text of one round for the candidates of that round and their evaluations.

    The costs the model predicted are in the objective's unit (its answers were trained so: instructions, or
    bytes of `.text`); the unoptimized `.text` size is not measured here, so only its prediction is shown.
    """
    objective = Objective(objective)
    actual_before = None
    if objective is Objective.INSTRUCTION_COUNT:
        with contextlib.suppress(IRError):
            actual_before = instruction_count(ir)
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
    new: list[tuple[Candidate, Evaluation]]  # candidates no earlier round produced, with their evaluations


@dataclass
class FeedbackResult:
    rounds: list[FeedbackRound] = field(default_factory=list)

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
    pool,
    ir: str,
    options: SamplingOptions,
    rounds: int,
    objective: Objective | str = Objective.INSTRUCTION_COUNT,
) -> FeedbackResult:
    """Up to 1 + `rounds` generations, each compiled on `pool` (a CompilerPool) and fed back to the next."""
    result = FeedbackResult()
    seen: set[tuple[str, ...]] = set()
    feedback = None
    for _ in range(rounds + 1):
        generation = await engine.generate(ir, options, feedback)
        fresh = [c for c in generation.candidates if c.pass_list not in seen]
        if not fresh:
            break
        seen.update(c.pass_list for c in fresh)
        evaluations = await pool.evaluate_async(ir, [c.pass_list for c in fresh], objective)
        new = list(zip(fresh, evaluations, strict=True))
        result.rounds.append(FeedbackRound(feedback, generation, new))
        feedback = build_feedback(ir, new, objective)
    return result
