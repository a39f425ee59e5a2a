"""Compiler-feedback retry with a real CompilerPool on real clang-19 IR."""

from __future__ import annotations

from asyncio import run

import pytest

from optserve.compiler.cost import Objective
from optserve.compiler.interface import Evaluation
from optserve.compiler.ir import instruction_count
from optserve.compiler.pipeline import evaluate
from optserve.compiler.workers import CompilerPool
from optserve.engine.feedback import build_feedback, generate_with_feedback
from optserve.engine.interface import Candidate, SamplingOptions, Strategy


@pytest.fixture(scope="module")
def pool():
    with CompilerPool(processes=1, timeout_s=20.0) as compiler_pool:
        yield compiler_pool


def test_feedback_compares_predicted_and_actual_counts(loop_function_ir):
    candidate = Candidate(("-Oz", "instcombine"), -1.5, predicted_cost_before=33, predicted_cost_after=10)
    evaluation = evaluate(loop_function_ir, candidate.pass_list, Objective.INSTRUCTION_COUNT)
    actual_before = instruction_count(loop_function_ir)
    text = build_feedback([(candidate, evaluation)], Objective.INSTRUCTION_COUNT, actual_before)
    assert "pass list: -Oz instcombine\nvalid: yes\n" in text
    assert f"instructions before: predicted 33, actual {actual_before}" in text
    assert f"instructions after: predicted 10, actual {evaluation.cost}" in text


def test_feedback_for_text_size_speaks_of_text_size(loop_function_ir):
    candidate = Candidate(("-Oz",), -0.5, predicted_cost_before=120, predicted_cost_after=40)
    evaluation = evaluate(loop_function_ir, candidate.pass_list, Objective.TEXT_SIZE)
    text = build_feedback([(candidate, evaluation)], Objective.TEXT_SIZE)
    assert "text_size before: predicted 120\n" in text
    assert f"text_size after: predicted 40, actual {evaluation.cost}" in text
    assert "instructions" not in text  # the model's counts are bytes here, not instructions


def test_feedback_reports_compile_errors(loop_function_ir):
    candidate = Candidate(("sroa",), -0.5)
    failed = Evaluation(("sroa",), None, "compiler worker crashed: the process was killed", 0.1)
    text = build_feedback([(candidate, failed)])
    assert "valid: no (compiler worker crashed: the process was killed)" in text


def test_feedback_rounds_compile_every_new_candidate_and_feed_it_back(torch_engine, pool, loop_function_ir):
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=3)
    result = run(generate_with_feedback(torch_engine, pool, loop_function_ir, options, rounds=2))
    assert 1 <= len(result.rounds) <= 3 and result.rounds[0].feedback is None
    lists = [candidate.pass_list for candidate, _ in result.measured]
    assert len(lists) == len(set(lists)) == result.compilations  # no list is compiled twice
    actual_before = instruction_count(loop_function_ir)  # the loop counts it in a compiler worker
    for earlier, later in zip(result.rounds, result.rounds[1:], strict=False):
        assert later.feedback == build_feedback(earlier.new, Objective.INSTRUCTION_COUNT, actual_before)
    for candidate, evaluation in result.measured:
        assert evaluation.ok, evaluation.error
        assert (
            evaluation.cost
            == evaluate(loop_function_ir, candidate.pass_list, Objective.INSTRUCTION_COUNT).cost
        )
    best_candidate, best_evaluation = result.best()
    assert best_evaluation.cost == min(e.cost for _, e in result.measured)


class _DeafEngine:
    """The real engine, minus the feedback: every round asks the same question."""

    def __init__(self, engine):
        self.engine, self.model_id = engine, engine.model_id

    async def generate(self, ir, options, feedback=None):
        return await self.engine.generate(ir, options, None)


def test_feedback_stops_when_a_round_adds_nothing(torch_engine, pool, loop_function_ir):
    options = SamplingOptions(strategy=Strategy.GREEDY)
    result = run(generate_with_feedback(_DeafEngine(torch_engine), pool, loop_function_ir, options, rounds=5))
    assert len(result.rounds) == 1 and result.compilations == 1  # round 2 repeated round 1: stop


class _RecordingEngine:
    """The real engine, recording the options of every round."""

    def __init__(self, engine):
        self.engine, self.options = engine, []

    async def generate(self, ir, options, feedback=None):
        self.options.append(options)
        return await self.engine.generate(ir, options, feedback)


def test_feedback_rounds_can_ask_with_other_options_and_compile_one_new_list_each(
    torch_engine, pool, loop_function_ir
):
    later = SamplingOptions(strategy=Strategy.PRIORITY, samples=3)
    engine = _RecordingEngine(torch_engine)
    result = run(
        generate_with_feedback(
            engine, pool, loop_function_ir, SamplingOptions(), 2, feedback_options=later, per_round=1
        )
    )
    assert [len(round_.new) for round_ in result.rounds] == [1, 1, 1]  # 3 samples hold a new list each time
    assert engine.options[0].strategy is Strategy.GREEDY and engine.options[1:] == [later, later]
