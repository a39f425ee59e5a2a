"""Priority sampling against a brute-force enumeration of the same search tree (no KV cache, no queue).

The grammar is cut down to a small tree: one to three of three pass names, each a single token, then a
newline. The brute force runs the model on the whole sequence at every node, expands every node's top-K
allowed tokens and gives each leaf its priority: the smallest probability among the non-greedy tokens on its
path (1 for the greedy path). Priority sampling must produce leaves of that tree, with the same
log-probabilities, in non-increasing priority, and the first N of them must carry the N largest priorities.
"""

from __future__ import annotations

import asyncio
import math
from asyncio import run

import outlines_core
import pytest
import torch

from optserve.deadline import Deadline
from optserve.engine.backend import DecodeRequest
from optserve.engine.grammar import TokenGrammar, token_bytes
from optserve.engine.sampling import PriorityOptions, priority_sampling
from optserve.engine.torch_backend import _top_k

NAMES = ("dce", "adce", "sroa")
REGEX = "(dce|adce|sroa)( (dce|adce|sroa)){0,2}\n"
TOP_K = 3


@pytest.fixture(scope="module")
def small_tree(torch_engine, sample_ir):
    """A grammar over just the tokens of REGEX, and a short prompt."""
    tokenizer = torch_engine.tokenizer
    wanted = {name.encode() for name in NAMES} | {b" ", b"\n"}
    by_id = {i: b for i, b in token_bytes(tokenizer).items() if b in wanted}
    vocabulary = outlines_core.Vocabulary(tokenizer.eos_token_id, {b: [i] for i, b in by_id.items()})
    grammar = TokenGrammar.from_vocabulary(REGEX, vocabulary, tokenizer.eos_token_id, by_id)
    return grammar, torch_engine.prompt_ids(sample_ir)[:48]


def _brute_force_leaves(model, prompt_ids, grammar):
    """(tokens, log-prob, log priority) of every leaf of the top-K tree, each node computed from scratch."""
    leaves = []

    def expand(prefix, state, logprob, priority):
        if grammar.only_eos_allowed(state):
            leaves.append((prefix, logprob, priority))
            return
        with torch.inference_mode():
            logits = model(torch.tensor([[*prompt_ids, *prefix]])).logits[0, -1].float()
        allowed = list(grammar.allowed_tokens(state))
        for rank, (token, token_logprob) in enumerate(_top_k(allowed, logits[allowed], TOP_K)):
            child_priority = priority if rank == 0 else min(priority, token_logprob)
            if token == grammar.eos_token_id:
                leaves.append((prefix, logprob + token_logprob, child_priority))
            else:
                expand(
                    (*prefix, token),
                    grammar.next_state(state, token),
                    logprob + token_logprob,
                    child_priority,
                )

    expand((), grammar.initial_state, 0.0, 0.0)
    return leaves


def _priority_samples(torch_engine, grammar, prompt_ids, samples, width=1):
    request = DecodeRequest(tuple(prompt_ids), grammar, max_new_tokens=16, top_k=TOP_K)
    session = torch_engine.decoder.session(request, width=width)
    options = PriorityOptions(samples=samples, branching=TOP_K, width=width)
    return run(priority_sampling(session, options, identity=lambda tokens: tokens, branchable=lambda _: True))


def test_priority_sampling_matches_the_brute_force_tree(torch_engine, small_tree):
    grammar, prompt_ids = small_tree
    leaves = _brute_force_leaves(torch_engine.decoder.model, prompt_ids, grammar)
    by_tokens = {tokens: (logprob, priority) for tokens, logprob, priority in leaves}
    assert len(by_tokens) == len(leaves) == 39  # 3 + 9 + 27 lists: the tree is as small as intended

    result = _priority_samples(torch_engine, grammar, prompt_ids, samples=len(leaves) + 5)
    assert result.queue_exhausted and len(result.samples) == len(leaves)  # every leaf once, then nothing
    for sample in result.samples:
        logprob, priority = by_tokens[sample.tokens]
        assert math.isclose(sample.logprob, logprob, abs_tol=1e-4)
        assert math.isclose(sample.priority, priority, abs_tol=1e-4)
    drawn = [s.priority for s in result.samples]
    assert all(a >= b - 1e-6 for a, b in zip(drawn, drawn[1:], strict=False))
    best_first = sorted((p for _, _, p in leaves), reverse=True)
    for n in (1, 5, 10, 20):
        assert drawn[:n] == pytest.approx(best_first[:n], abs=1e-4)


def test_first_samples_do_not_depend_on_how_many_are_asked_for(torch_engine, small_tree):
    grammar, prompt_ids = small_tree
    few = _priority_samples(torch_engine, grammar, prompt_ids, samples=7)
    many = _priority_samples(torch_engine, grammar, prompt_ids, samples=20)
    assert [s.tokens for s in few.samples] == [s.tokens for s in many.samples[:7]]


def test_parallel_priority_sampling_covers_the_same_tree(torch_engine, small_tree):
    grammar, prompt_ids = small_tree
    sequential = _priority_samples(torch_engine, grammar, prompt_ids, samples=50)
    parallel = _priority_samples(torch_engine, grammar, prompt_ids, samples=50, width=4)
    assert {s.tokens for s in parallel.samples} == {s.tokens for s in sequential.samples}
    assert parallel.samples[0].tokens == sequential.samples[0].tokens


class _SlowSession:
    """The real session, made to outlast a deadline after its first batch (a deterministic slow model)."""

    def __init__(self, session, deadline):
        self.session, self.deadline = session, deadline

    async def greedy(self, prefixes):
        continuations = await self.session.greedy(prefixes)
        await asyncio.sleep(max(0.0, self.deadline.remaining_s()) + 0.01)
        return continuations


def test_deadline_returns_the_samples_found_so_far(torch_engine, small_tree):
    grammar, prompt_ids = small_tree
    request = DecodeRequest(tuple(prompt_ids), grammar, max_new_tokens=16, top_k=TOP_K)
    deadline = Deadline.after(0.05)
    session = _SlowSession(torch_engine.decoder.session(request), deadline)
    options = PriorityOptions(samples=30, branching=TOP_K)
    result = run(priority_sampling(session, options, lambda t: t, lambda _: True, deadline=deadline))
    assert result.deadline_hit and len(result.samples) == 1 and result.samples[0].priority == 0.0
