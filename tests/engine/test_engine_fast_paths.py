"""The torch backend's fast paths give what the plain paths give.

- `CompactLlama` (the backend's own Llama forward) against transformers' forward, on a model with grouped
  key-value heads and tied embeddings (the trained passformer's layout), with and without cache holes;
- the same candidates from the compact and the transformers forward (greedy, priority, parallel priority);
- grammar-forced tokens taken without a model step: the decoded answer equals a naive decode that runs the
  whole sequence through the model at every token, with fewer forward calls.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch

from optserve.engine.backend import DecodeRequest
from optserve.engine.engine import ModelEngine
from optserve.engine.interface import SamplingOptions, Strategy
from optserve.engine.llama_forward import CompactLlama
from optserve.passlm.tiny_model import SHAPES, build_tiny_model
from tests.engine.engine_helpers import assert_same_candidates

GQA_SHAPE = dataclasses.replace(
    SHAPES["tiny"], hidden_size=64, heads=4, kv_heads=2, intermediate_size=96, tie_embeddings=True
)


@pytest.fixture(scope="module")
def gqa_model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("gqa-model"), seed=1, shape=GQA_SHAPE)


@pytest.fixture(scope="module")
def engines(gqa_model_dir):
    compact = ModelEngine.load(gqa_model_dir, backend="torch")
    plain = ModelEngine.load(gqa_model_dir, backend="torch", compact=False)
    yield compact, plain
    asyncio.run(compact.close())
    asyncio.run(plain.close())


def test_the_compact_forward_is_used_for_llama_models(engines):
    compact, plain = engines
    assert type(compact.decoder.network).__name__ == "_CompactNetwork"
    assert type(plain.decoder.network).__name__ == "_TransformersNetwork"


def test_the_engine_runs_on_the_gpu_when_torch_sees_one_else_on_the_cpu_in_float32(engines):
    compact, _ = engines
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert compact.decoder.device.type == expected
    dtype = next(compact.decoder.model.parameters()).dtype
    assert dtype == (torch.bfloat16 if expected == "cuda" else torch.float32)


@torch.inference_mode()
def test_compact_forward_matches_transformers(engines):
    model = engines[1].decoder.model
    llama = CompactLlama(model)
    head = llama.head_weight
    ids = torch.randint(0, model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(0))
    expected = model(input_ids=ids).logits
    cache = llama.new_cache(8)  # grows while prefilling
    prefill = llama.forward(cache, ids[:, :30], torch.arange(30)[None], None) @ head.T
    assert torch.allclose(prefill, expected[:, :30], atol=1e-4)
    for position in range(30, 40):  # one token at a time over the cache
        step = llama.forward(cache, ids[:, position : position + 1], torch.tensor([[position]]), None)
        assert torch.allclose(step[0, -1] @ head.T, expected[0, position], atol=1e-4)


@torch.inference_mode()
def test_compact_forward_hides_cache_holes_like_a_shorter_sequence(engines):
    model = engines[1].decoder.model
    llama = CompactLlama(model)
    ids = torch.randint(0, model.config.vocab_size, (1, 12), generator=torch.Generator().manual_seed(1))
    cache = llama.new_cache(32)
    llama.forward(cache, ids[:, :10], torch.arange(10)[None], None)
    cache.repeat_rows(2)
    # row 0 drops slots 8-9 and continues at position 8 with tokens 10-11; row 1 keeps everything
    valid = torch.ones(2, 12, dtype=torch.bool)
    valid[0, 8:10] = False
    feed = torch.stack([ids[0, 10:12], ids[0, 10:12]])
    positions = torch.tensor([[8, 9], [10, 11]])
    hidden = llama.forward(cache, feed, positions, valid)
    short = torch.cat([ids[:, :8], ids[:, 10:12]], dim=1)
    head = llama.head_weight
    assert torch.allclose(hidden[0, -1] @ head.T, model(input_ids=short).logits[0, -1], atol=1e-4)
    assert torch.allclose(hidden[1, -1] @ head.T, model(input_ids=ids).logits[0, -1], atol=1e-4)


@pytest.mark.parametrize(
    "options",
    [
        SamplingOptions(),
        SamplingOptions(strategy=Strategy.PRIORITY, samples=10),
        SamplingOptions(strategy=Strategy.PRIORITY, samples=10, parallel=3, predict_costs=False),
    ],
    ids=["greedy", "ps10", "pps10"],
)
def test_compact_and_transformers_forward_give_the_same_candidates(engines, sample_ir, options):
    compact, plain = engines
    fast = asyncio.run(compact.generate(sample_ir, options))
    slow = asyncio.run(plain.generate(sample_ir, options))
    assert_same_candidates(fast, slow)


def _naive_greedy(model, grammar, prompt_ids, max_new_tokens):
    """Greedy decoding under the grammar, the whole sequence through the model at every token."""
    tokens, logprobs, state = [], [], grammar.initial_state
    while not grammar.only_eos_allowed(state) and len(tokens) < max_new_tokens:
        with torch.inference_mode():
            logits = model(torch.tensor([[*prompt_ids, *tokens]])).logits[0, -1]
        allowed = list(grammar.allowed_tokens(state))
        masked = logits[allowed].log_softmax(-1)
        best = int(masked.argmax())
        if allowed[best] == grammar.eos_token_id:
            break
        tokens.append(allowed[best])
        logprobs.append(float(masked[best]))
        state = grammar.next_state(state, allowed[best])
    return tokens, logprobs


def test_forced_tokens_skip_model_steps_without_changing_the_answer(engines, sample_ir):
    compact = engines[0]
    decoder = compact.decoder
    grammar = compact.grammar(True)
    prompt_ids = compact.prompt_ids(sample_ir)[:64]
    expected_tokens, expected_logprobs = _naive_greedy(decoder.model, grammar, prompt_ids, 60)

    calls = []
    forward = decoder.network.forward
    decoder.network.forward = lambda *args: calls.append(args[1].shape) or forward(*args)
    try:
        session = decoder.session(DecodeRequest(tuple(prompt_ids), grammar, max_new_tokens=60, top_k=3))
        [continuation] = asyncio.run(session.greedy([()]))
    finally:
        del decoder.network.forward
    assert list(continuation.tokens) == expected_tokens
    got = [s.logprob for s in continuation.steps if s.token != grammar.eos_token_id]
    assert got == pytest.approx(expected_logprobs, abs=1e-4)
    states = [grammar.walk(continuation.tokens[:n]) for n in range(len(continuation.tokens))]
    forced = sum(len(grammar.allowed_tokens(state)) == 1 for state in states)
    assert forced, "the grammar should force some tokens of this answer (else this test checks nothing)"
    assert len(calls) - 1 < len(continuation.steps)  # prefill + fewer forwards than decoded tokens
