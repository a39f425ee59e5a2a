"""The answer grammar as a token automaton: with pass tokens, and with a tokenizer that splits pass names."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optserve.compiler.passes import META_FLAGS, PASS_NAMES, PassListError
from optserve.engine.grammar import TokenGrammar, token_bytes
from optserve.passlm.tiny_model import TINY_PROFILE

ANSWER = TINY_PROFILE.answer_format()
TOKENIZERS = ["pass_token_tokenizer", "split_pass_tokenizer"]


@pytest.fixture(scope="module", params=TOKENIZERS)
def tokenizer(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def grammar(tokenizer) -> TokenGrammar:
    return TokenGrammar.build(ANSWER.regex(with_costs=True), tokenizer)


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_pass_names_are_single_tokens_only_in_the_bundled_tokenizer(
    pass_token_tokenizer, split_pass_tokenizer
):
    for name in (*PASS_NAMES, *META_FLAGS):
        assert len(_ids(pass_token_tokenizer, name)) == 1
    assert all(len(_ids(split_pass_tokenizer, name)) > 1 for name in ("instcombine", "simplifycfg", "-Oz"))


def test_byte_level_tokens_map_back_to_their_bytes(split_pass_tokenizer):
    by_id = token_bytes(split_pass_tokenizer)
    text = "-Oz loop-unroll sroa\n12 -> 7"
    assert b"".join(by_id[i] for i in _ids(split_pass_tokenizer, text)) == text.encode()


@pytest.mark.parametrize(
    "pass_list", [("-Oz",), ("instcombine",), ("-O2", "loop-unroll", "loop-unroll-and-jam", "sroa")]
)
def test_tokenized_valid_answers_are_accepted(tokenizer, grammar, pass_list):
    state = grammar.walk(_ids(tokenizer, ANSWER.render(pass_list, 120, 17)))
    assert state is not None and grammar.index.is_final_state(state)
    assert grammar.eos_token_id in grammar.allowed_tokens(state)


@pytest.mark.parametrize(
    "text",
    ["instcombine -Oz\n1 -> 1", "-Oz -O2\n1 -> 1", "no-such-pass\n1 -> 1", "dce  dce\n1 -> 1", "dce\n-> 1"],
)
def test_invalid_answers_are_rejected(tokenizer, grammar, text):
    assert grammar.walk(_ids(tokenizer, text)) is None


def test_pass_list_only_grammar_ends_after_the_list(tokenizer):
    grammar = TokenGrammar.build(ANSWER.regex(with_costs=False), tokenizer)
    state = grammar.walk(_ids(tokenizer, "-Oz dce\n"))
    assert state is not None and grammar.only_eos_allowed(state)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_walks_through_the_automaton_always_parse(tokenizer, grammar, seed):
    """Whatever allowed tokens a model picks, the finished answer is a valid pass list with its two counts."""
    rng = random.Random(seed)
    state, tokens = grammar.initial_state, []
    while not grammar.only_eos_allowed(state) and len(tokens) < 400:
        token = rng.choice(grammar.allowed_tokens(state))
        if token == grammar.eos_token_id:
            break
        tokens.append(token)
        state = grammar.next_state(state, token)
        assert state is not None
    if not grammar.index.is_final_state(state):
        pytest.skip("walk cut at 400 tokens")  # practically never: lists are at most 25 names
    answer = ANSWER.parse(grammar.decode(tokens))
    assert answer.cost_before is not None and answer.cost_after is not None
    assert all(name in PASS_NAMES or name in META_FLAGS for name in answer.pass_list)


def test_the_parser_rejects_what_the_grammar_rejects():
    with pytest.raises(PassListError):
        ANSWER.parse("dce -Oz\n1 -> 2")
