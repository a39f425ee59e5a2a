"""The model profile: prompt and answer format, loading, and a second model's format (opt pipelines)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from optserve.engine.grammar import TokenGrammar
from optserve.engine.profile import ModelProfile, encode_example
from optserve.passlm.tiny_model import TINY_PROFILE

# A profile in the style of Meta's LLM Compiler (REFERENCE.md: its prompt; the answer template is assumed).
LLM_COMPILER_STYLE = ModelProfile(
    model_id="llm-compiler-style",
    prompt_template=(
        "[INST] Tell me how to optimize this LLVM-IR for object file size:\n\n<code>{ir}</code> [/INST]"
    ),
    answer_template="opt -p '{pass_list}'",
    pass_syntax="opt-pipeline",
    normalize_ir=False,
)


def test_answer_round_trip():
    answer = TINY_PROFILE.answer_format()
    text = answer.render(("-Oz", "instcombine", "simplifycfg"), 31, 12)
    assert text == "-Oz instcombine simplifycfg\n31 -> 12"
    parsed = answer.parse(text)
    assert (parsed.pass_list, parsed.cost_before, parsed.cost_after) == (
        ("-Oz", "instcombine", "simplifycfg"),
        31,
        12,
    )


def test_answer_cut_before_its_counts_still_gives_the_pass_list():
    parsed = TINY_PROFILE.answer_format().parse("sroa dce\n")
    assert parsed.pass_list == ("sroa", "dce") and parsed.cost_before is None


def test_profile_saves_and_loads(tmp_path):
    TINY_PROFILE.save(tmp_path)
    assert ModelProfile.load(tmp_path) == TINY_PROFILE


def test_missing_profile_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="profile.json"):
        ModelProfile.load(tmp_path)


@pytest.mark.parametrize(
    "change",
    [
        {"prompt_template": "no ir here"},
        {"answer_template": "{cost_before} only"},
        {"answer_template": "{pass_list}"},  # nothing closes the list
        {"answer_template": "{pass_list}\n{cost_before}"},  # one count without the other
        {"pass_syntax": "klingon"},
    ],
)
def test_bad_profiles_are_rejected(change):
    with pytest.raises(ValidationError):
        ModelProfile(**{**TINY_PROFILE.model_dump(), **change})


def test_prompt_carries_ir_and_feedback():
    prompt = TINY_PROFILE.prompt("define void @f() {\n  ret void\n}\n", feedback="valid: yes")
    assert (
        prompt.startswith("<ir>\ndefine void @f()")
        and "<feedback>\nvalid: yes</feedback>\n<answer>\n" in prompt
    )
    assert "<feedback>" not in TINY_PROFILE.prompt("x")


def test_encode_example_frames_prompt_and_answer(pass_token_tokenizer):
    prompt_ids, answer_ids = encode_example(
        TINY_PROFILE, pass_token_tokenizer, "<ir>\nx</ir>\n<answer>\n", "dce\n1 -> 1"
    )
    assert prompt_ids[0] == pass_token_tokenizer.bos_token_id
    assert answer_ids[-1] == pass_token_tokenizer.eos_token_id


def test_opt_pipeline_syntax_converts_to_compiler_pass_lists(split_pass_tokenizer):
    answer = LLM_COMPILER_STYLE.answer_format()
    text = answer.render(("-Oz", "instcombine", "loop-unroll"))
    assert text == "opt -p 'default<Oz>,instcombine,loop-unroll'"
    assert answer.parse(text).pass_list == ("-Oz", "instcombine", "loop-unroll")
    grammar = TokenGrammar.build(answer.regex(), split_pass_tokenizer)
    state = grammar.walk(split_pass_tokenizer.encode(text, add_special_tokens=False))
    assert state is not None and grammar.only_eos_allowed(state)
    assert (
        grammar.walk(
            split_pass_tokenizer.encode("opt -p 'instcombine,default<Oz>'", add_special_tokens=False)
        )
        is None
    )
