"""Training pipeline of the pass-ordering model: examples, tokenizer, a short real training run, packaging."""

from __future__ import annotations

import json
import random

import pytest

from optserve.engine.profile import encode_example
from optserve.passlm.examples import (
    NO_PASSES,
    PASSFORMER_PROFILE,
    best_coreset_list,
    best_servable_list,
    read_records,
    training_texts,
    within_margin,
    write_records,
)
from optserve.passlm.tiny_model import synthetic_function
from optserve.passlm.tokenizer import chars_per_token, train_tokenizer

TINY_ARCH = json.dumps(
    {
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
        "max_position_embeddings": 512,
    }
)


def _example(ir: str, pass_list: list[str], unoptimized: int, best: int, objective="text_size") -> dict:
    label = {"pass_list": pass_list, "unoptimized": unoptimized, "best": best, "oz": best}
    return {"id": str(hash(ir)), "ir": ir, "labels": {objective: label}}


def test_training_text_is_the_profile_format_and_parses_back():
    ir = synthetic_function(random.Random(1))
    prompt, answer = training_texts(_example(ir, ["-Oz", "sroa"], 30, 12))
    assert prompt == PASSFORMER_PROFILE.prompt(ir, objective="text_size")
    assert prompt.endswith("</ir>\n<objective>text_size</objective>\n<answer>\n")
    assert answer == "-Oz sroa\n30 -> 12"
    parsed = PASSFORMER_PROFILE.answer_format().parse(answer)
    assert (parsed.pass_list, parsed.cost_before, parsed.cost_after) == (("-Oz", "sroa"), 30, 12)


def test_the_prompt_names_the_objective_the_model_was_trained_for_else_its_default():
    ir = synthetic_function(random.Random(3))
    example = _example(ir, ["sroa"], 9, 5, objective="instruction_count")
    prompt, _ = training_texts(example, objective="instruction_count")
    assert "<objective>instruction_count</objective>" in prompt
    # An objective the model does not know is replaced by its default, not refused.
    unknown = PASSFORMER_PROFILE.model_copy(update={"objectives": ("instruction_count",)})
    assert "<objective>instruction_count</objective>" in unknown.prompt(ir, objective="text_size")


def test_the_best_coreset_list_is_the_cheapest_measured_one_and_needs_every_list_measured():
    coreset = [["sroa"], ["-O1", "dse"], ["instcombine"]]
    known = {("sroa",): 30, ("-O1", "dse"): 25, ("instcombine",): 25, ("-Oz",): 40}
    assert best_coreset_list(known, coreset) == (("-O1", "dse"), 25)  # the earlier of two at 25
    del known[("instcombine",)]
    assert best_coreset_list(known, coreset) is None  # the unmeasured list might have been best
    assert best_coreset_list(known, []) is None


def test_a_list_is_the_answer_only_where_it_beats_oz_by_the_margin():
    assert within_margin((("sroa",), 96), 100, 0.03) == (("sroa",), 96)
    assert within_margin((("sroa",), 97), 100, 0.03) == (("-Oz",), 100)  # 3% is not more than 3%
    assert within_margin((("sroa",), 99), 100, 0.0) == (("sroa",), 99)
    assert within_margin((("sroa",), 100), 100, 0.0) == (("-Oz",), 100)  # a tie names -Oz


def test_the_answer_is_the_cheapest_list_the_service_can_still_serve():
    known = {("instcombine", "newgvn"): 20, ("sroa", "dse"): 24, ("dse",): 24, ("-Oz",): 30}
    assert best_servable_list(known) == (("dse",), 24)  # newgvn left the vocabulary; the shorter of two at 24
    assert best_servable_list({("instcombine", "newgvn"): 20}) is None


def test_an_empty_best_list_is_written_as_o0_which_the_grammar_accepts():
    import re

    _, answer = training_texts(_example(synthetic_function(random.Random(2)), [], 8, 8))
    assert answer.startswith(" ".join(NO_PASSES) + "\n")
    assert re.fullmatch(PASSFORMER_PROFILE.answer_format().regex(), answer)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    rng = random.Random(0)
    lists = [["-Oz"], ["-O1", "dse"], [], ["sroa", "instcombine"]]
    out = []
    for i in range(60):
        ir = synthetic_function(rng, f"f{i}")
        prompt, answer = training_texts(_example(ir, lists[i % len(lists)], 20 + i, 10 + i % 7))
        out.append(
            {
                # every tenth is a best-coreset-list example (passlm.examples --coreset-answers)
                "id": f"{i:04d}/text_size" + ("/coreset" if i % 10 == 0 else ""),
                "source": "synthetic",
                "oz": 10,
                "best": 10,
                "prompt": prompt,
                "answer": answer,
            }
        )
    path = tmp_path_factory.mktemp("records") / "train.jsonl.xz"
    counts = write_records(iter(out), path)
    assert counts == {"synthetic": 60} and read_records(path) == out
    return path


@pytest.fixture(scope="module")
def tokenizer_dir(records, tmp_path_factory):
    texts = [r["prompt"] + r["answer"] for r in read_records(records)]
    directory = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(texts, vocab_size=400).save_pretrained(directory)
    return directory


def test_tokenizer_spells_every_pass_as_one_token_and_compresses_ir(tokenizer_dir, records):
    from transformers import AutoTokenizer

    from optserve.compiler.passes import META_FLAGS, PASS_NAMES

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    for name in (*META_FLAGS, *PASS_NAMES):
        assert len(tokenizer.encode(name, add_special_tokens=False)) == 1, name
    prompts = [r["prompt"] for r in read_records(records)]
    assert chars_per_token(tokenizer, prompts) > 1.5  # BPE merges, not one token per byte
    prompt_ids, answer_ids = encode_example(PASSFORMER_PROFILE, tokenizer, prompts[0], "-Oz sroa\n3 -> 2")
    assert prompt_ids[0] == tokenizer.bos_token_id and answer_ids[-1] == tokenizer.eos_token_id


def test_training_run_resumes_and_packages_a_loadable_model(records, tokenizer_dir, tmp_path):
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from optserve.engine.profile import ModelProfile
    from optserve.passlm import train
    from optserve.passlm.package import SUMMARY_FILE, package

    run = tmp_path / "run"
    common = [
        "--data",
        str(records),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(run),
        "--batch-tokens",
        "4096",
        "--arch",
        TINY_ARCH,
        "--eval-every",
        "4",
        "--warmup",
        "2",
    ]
    # A run stopped at once (time limit) leaves a checkpoint and a usable final/; --resume finishes it.
    assert train.main([*common, "--steps", "8", "--time-limit", "0"]) == 0
    stopped = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert stopped[-1]["event"] == "stopped" and stopped[-1]["step"] == 1
    assert train.main([*common, "--resume"]) == 0
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert log[-1]["event"] == "end" and log[-1]["step"] == 8
    assert any(entry.get("resumed_at_step") == 1 for entry in log)
    start = next(e for e in log if e.get("event") == "start")
    assert start["train_examples"] + start["val_examples"] == 60

    # --init-from: a second run starts from these weights
    assert (
        train.main(
            [
                *common[:5],
                str(tmp_path / "run2"),
                *common[6:],
                "--steps",
                "1",
                "--init-from",
                str(run / "final"),
                "--skip-kind",
                "coreset",
            ]
        )
        == 0
    )
    second = [json.loads(line) for line in (tmp_path / "run2" / "log.jsonl").read_text().splitlines()]
    start = next(e for e in second if e.get("event") == "start")
    assert start["train_examples"] + start["val_examples"] == 54  # the 6 coreset examples left out

    model_dir = package(run, tmp_path / "model")
    assert ModelProfile.load(model_dir) == PASSFORMER_PROFILE
    assert json.loads((model_dir / SUMMARY_FILE).read_text())["evaluations"]
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = torch.tensor([tokenizer.encode("<ir>\n", add_special_tokens=False)])
    assert model(input_ids=ids).logits.shape[-1] == len(tokenizer)


def test_examples_longer_than_max_tokens_are_the_ones_the_trainer_drops(records, tokenizer_dir):
    from transformers import AutoTokenizer

    from optserve.passlm.examples import within_tokens
    from optserve.passlm.train import tokenize

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    examples = read_records(records)
    lengths = sorted(len(e.ids) for e in tokenize(examples, tokenizer, 10**6, 0.0))
    limit = lengths[len(lengths) // 2]  # about half of them fit
    kept = list(within_tokens(iter(examples), tokenizer, limit, batch=7))
    assert 0 < len(kept) < len(examples)
    assert len(kept) == len(tokenize(examples, tokenizer, limit, 0.0))
    assert [r["id"] for r in kept] == [r["id"] for r in examples if r in kept]  # order kept


def test_beat_coreset_keeps_the_answers_cheaper_than_the_function_s_best_coreset_list():
    from optserve.passlm.train import beating_coreset, record_kind

    records = [
        {"id": "pkg/a.c:f/text_size", "best": 90},  # the label: beats the coreset's best (95)
        {"id": "pkg/a.c:f/text_size/top2", "best": 95},  # ties it: the coreset candidate gives it already
        {"id": "pkg/a.c:f/text_size/coreset", "best": 95},
        {"id": "pkg/a.c:g/text_size", "best": 50},  # the coreset's best is the label's list
        {"id": "pkg/a.c:g/text_size/coreset", "best": 50},
        {"id": "pkg/b.c:top/text_size", "best": 7},  # no coreset record: nothing to compare, kept
    ]
    kept = [r["id"] for r in beating_coreset(records)]
    assert kept == [
        "pkg/a.c:f/text_size",
        "pkg/a.c:f/text_size/coreset",
        "pkg/a.c:g/text_size/coreset",
        "pkg/b.c:top/text_size",
    ]
    assert record_kind("pkg/b.c:top/text_size") == ("pkg/b.c:top/text_size", "")  # a function named "top"
    assert record_kind("pkg/a.c:f/text_size/top12") == ("pkg/a.c:f/text_size", "top12")


class _RunsCode:
    """Pickles as a call (Path.touch of `marker`): what a crafted checkpoint makes torch.load run."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (self.marker,))


def test_resume_loads_no_code_from_a_checkpoint(records, tokenizer_dir, tmp_path):
    """--resume reads the checkpoint with torch.load(weights_only=True): a file that would run code is
    refused (UnpicklingError) before anything of it runs."""
    import pickle

    import torch

    from optserve.passlm import train

    run, marker = tmp_path / "run", tmp_path / "code-ran"
    run.mkdir()
    torch.save({"model": {}, "payload": _RunsCode(marker)}, run / "checkpoint.pt")
    arguments = ["--data", str(records), "--tokenizer", str(tokenizer_dir), "--out", str(run)]
    with pytest.raises(pickle.UnpicklingError):
        train.main([*arguments, "--arch", TINY_ARCH, "--batch-tokens", "4096", "--steps", "1", "--resume"])
    assert not marker.exists()
