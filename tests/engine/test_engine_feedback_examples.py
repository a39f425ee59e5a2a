"""Feedback training examples (optserve.passlm.feedback_examples): a real engine's first try on real IR,
compiled, fed back in the prompt, with the label's answer as target."""

from __future__ import annotations

import json
from asyncio import run

import pytest

from optserve.compiler.cost import Objective
from optserve.compiler.ir import instruction_count, normalize_ir
from optserve.compiler.pipeline import evaluate, oz_cost
from optserve.engine.feedback import build_feedback
from optserve.engine.interface import Candidate
from optserve.passlm.examples import (
    OBJECTIVE,
    PASSFORMER_PROFILE,
    read_records,
    training_texts,
    write_records,
)
from optserve.passlm.feedback_examples import FIRST_TRY, feedback_record, generate_records, mix_records


@pytest.fixture(scope="module")
def labelled_example(loop_function_ir) -> dict:
    ir = normalize_ir(loop_function_ir)
    label_list = ["-Oz", "instcombine"]
    return {
        "id": "loops:find_first",
        "source": "tests",
        "ir": ir,
        "labels": {
            "instruction_count": {
                "unoptimized": instruction_count(ir),
                "oz": oz_cost(ir, Objective.INSTRUCTION_COUNT),
                "best": evaluate(ir, label_list, Objective.INSTRUCTION_COUNT).cost,
                "pass_list": label_list,
            }
        },
    }


def test_record_prompt_carries_the_feedback_on_the_models_first_try(torch_engine, labelled_example):
    record = run(feedback_record(torch_engine, labelled_example))
    ir = labelled_example["ir"]
    first = run(torch_engine.generate(ir, FIRST_TRY)).candidates[0]
    evaluation = evaluate(ir, first.pass_list, Objective.INSTRUCTION_COUNT)
    assert record["first_try"] == {"pass_list": list(first.pass_list), "cost": evaluation.cost}
    feedback = build_feedback([(first, evaluation)], Objective.INSTRUCTION_COUNT, instruction_count(ir))
    assert record["prompt"] == PASSFORMER_PROFILE.prompt(ir, feedback, OBJECTIVE)
    assert "<feedback>\npass list: " in record["prompt"] and record["prompt"].endswith("<answer>\n")


def test_record_answer_is_the_labels_answer(torch_engine, labelled_example):
    record = run(feedback_record(torch_engine, labelled_example))
    label = labelled_example["labels"]["instruction_count"]
    assert record["answer"] == training_texts(labelled_example, objective=OBJECTIVE)[1]
    assert record["answer"].startswith("-Oz instcombine\n")
    assert (record["id"], record["source"], record["oz"], record["best"]) == (
        "loops:find_first",
        "tests",
        label["oz"],
        label["best"],
    )


def test_feedback_says_when_predicted_counts_were_wrong(labelled_example):
    ir = labelled_example["ir"]
    candidate = Candidate(("-Oz",), -0.1, predicted_cost_before=1, predicted_cost_after=1)
    evaluation = evaluate(ir, candidate.pass_list, Objective.INSTRUCTION_COUNT)
    text = build_feedback([(candidate, evaluation)], Objective.INSTRUCTION_COUNT, instruction_count(ir))
    assert f"instructions after: predicted 1, actual {evaluation.cost} (wrong)" in text


def test_records_stop_at_the_limit_and_round_trip_through_the_record_file(
    torch_engine, labelled_example, tmp_path
):
    examples = [dict(labelled_example, id=f"f{i}") for i in range(3)]
    records = list(generate_records(torch_engine, iter(examples), limit=2))
    assert [r["id"] for r in records] == ["f0", "f1"]
    out = tmp_path / "feedback.jsonl.xz"
    write_records(iter(records), out)
    assert read_records(out) == json.loads(json.dumps(records))


def test_mix_keeps_the_originals_and_repeats_the_feedback_records_without_first_try():
    original = [{"id": "a", "prompt": "p", "answer": "x"}]
    feedback = [{"id": "b", "prompt": "q", "answer": "y", "first_try": {"pass_list": ["-Oz"], "cost": 3}}]
    mixed = list(mix_records(original, feedback, repeat=2))
    assert mixed == [
        original[0],
        {"id": "b", "prompt": "q", "answer": "y"},
        {"id": "b", "prompt": "q", "answer": "y"},
    ]
