"""Strategies on the torch backend, tiny random model: greedy, priority sampling, parallel, nucleus."""

from __future__ import annotations

import random
from asyncio import run

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optserve.compiler.passes import META_FLAGS, PASS_NAMES, validate_pass_list
from optserve.deadline import Deadline
from optserve.engine.engine import PromptTooLongError
from optserve.engine.interface import SamplingOptions, Strategy
from optserve.passlm.tiny_model import synthetic_function

PS10 = SamplingOptions(strategy=Strategy.PRIORITY, samples=10)


def _lists(generation):
    return [c.pass_list for c in generation.candidates]


def test_greedy_gives_one_candidate_with_counts(torch_engine, sample_ir):
    generation = run(torch_engine.generate(sample_ir, SamplingOptions()))
    [candidate] = generation.candidates
    assert validate_pass_list(candidate.pass_list) == candidate.pass_list
    assert candidate.priority == 1.0 and candidate.logprob < 0
    assert candidate.predicted_cost_before is not None and candidate.predicted_cost_after is not None
    assert generation.model_id == "passformer-tiny-random" and not generation.deadline_hit


def test_priority_sampling_is_unique_ordered_and_starts_greedy(torch_engine, sample_ir):
    greedy = run(torch_engine.generate(sample_ir, SamplingOptions()))
    generation = run(torch_engine.generate(sample_ir, PS10))
    lists = _lists(generation)
    assert len(lists) == 10 and len(set(lists)) == 10
    assert lists[0] == greedy.candidates[0].pass_list
    priorities = [c.priority for c in generation.candidates]
    assert priorities == sorted(priorities, reverse=True) and priorities[0] == 1.0


def test_allowed_lists_are_ranked_by_the_model_and_nothing_else_is_drawn(torch_engine, sample_ir):
    allowed = (("-Oz",), ("sroa",), ("-O1", "sroa"), ("-O1",), ("dse", "sroa"))
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=10, allowed_lists=allowed)
    generation = run(torch_engine.generate(sample_ir, options))
    lists = _lists(generation)
    assert sorted(lists) == sorted(allowed)  # all of them (fewer than asked for), each once
    priorities = [c.priority for c in generation.candidates]
    assert priorities == sorted(priorities, reverse=True)  # Algorithm 1's order
    greedy = run(torch_engine.generate(sample_ir, SamplingOptions(allowed_lists=allowed)))
    assert _lists(greedy) == lists[:1]


def test_priority_sampling_is_deterministic_across_runs(torch_engine, sample_ir):
    first = run(torch_engine.generate(sample_ir, PS10))
    second = run(torch_engine.generate(sample_ir, PS10))
    assert first.candidates == second.candidates


def test_priority_sampling_reuses_the_prefix(torch_engine, sample_ir):
    greedy = run(torch_engine.generate(sample_ir, SamplingOptions()))
    generation = run(torch_engine.generate(sample_ir, PS10))
    # the prompt is computed once and each branch only from its branching point on
    assert generation.tokens_computed < 3 * greedy.tokens_computed


def test_without_branching_priority_sampling_stops_after_greedy(torch_engine, sample_ir):
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=5, max_branch=1)
    assert len(run(torch_engine.generate(sample_ir, options)).candidates) == 1


def test_geometric_priority_also_yields_unique_ordered_samples(torch_engine, sample_ir):
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=8, geometric_priority=True, max_branch=3)
    candidates = run(torch_engine.generate(sample_ir, options)).candidates
    assert len({c.pass_list for c in candidates}) == len(candidates) == 8
    assert [c.priority for c in candidates] == sorted((c.priority for c in candidates), reverse=True)


def test_parallel_priority_sampling_of_width_one_is_algorithm_1(torch_engine, sample_ir):
    sequential = run(torch_engine.generate(sample_ir, PS10))
    width_one = run(
        torch_engine.generate(sample_ir, SamplingOptions(strategy=Strategy.PRIORITY, samples=10, parallel=1))
    )
    assert sequential.candidates == width_one.candidates


def test_parallel_priority_sampling_is_unique_deterministic_and_starts_greedy(torch_engine, sample_ir):
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=6, parallel=3)
    first = run(torch_engine.generate(sample_ir, options))
    second = run(torch_engine.generate(sample_ir, options))
    lists = _lists(first)
    assert len(lists) == len(set(lists)) == 6 and first.candidates == second.candidates
    assert lists[0] == run(torch_engine.generate(sample_ir, SamplingOptions())).candidates[0].pass_list


def test_nucleus_sampling_is_seeded_and_deduplicated(torch_engine, sample_ir):
    options = SamplingOptions(strategy=Strategy.NUCLEUS, samples=6, temperature=1.2, top_p=0.95, seed=7)
    first = run(torch_engine.generate(sample_ir, options))
    assert first.candidates == run(torch_engine.generate(sample_ir, options)).candidates
    lists = _lists(first)
    assert 1 <= len(lists) <= 6 and len(set(lists)) == len(lists)
    other_seed = run(torch_engine.generate(sample_ir, SamplingOptions(**{**options.__dict__, "seed": 8})))
    assert _lists(other_seed) != lists


def test_a_deadline_that_passes_at_once_ends_the_search(torch_engine, sample_ir):
    options = SamplingOptions(strategy=Strategy.PRIORITY, samples=200, deadline=Deadline.after(1e-4))
    generation = run(torch_engine.generate(sample_ir, options))
    assert generation.deadline_hit and len(generation.candidates) < 200


def test_ir_longer_than_the_context_is_refused(torch_engine):
    rng = random.Random(0)
    huge = "".join(synthetic_function(rng, f"f{i}") for i in range(20))
    with pytest.raises(PromptTooLongError, match="tokens"):
        run(torch_engine.generate(huge, SamplingOptions()))


@pytest.mark.parametrize(
    "bad", [{"samples": 0}, {"top_k": 0}, {"temperature": 0.0}, {"top_p": 1.5}, {"parallel": 0}]
)
def test_bad_options_are_rejected(bad):
    with pytest.raises(ValueError):
        SamplingOptions(**bad)


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10_000),
    strategy=st.sampled_from([Strategy.GREEDY, Strategy.PRIORITY, Strategy.NUCLEUS]),
    samples=st.integers(1, 4),
    parallel=st.integers(1, 3),
)
def test_every_candidate_is_a_valid_pass_list(torch_engine, seed, strategy, samples, parallel):
    ir = synthetic_function(random.Random(seed), f"fn{seed}")
    options = SamplingOptions(
        strategy=strategy, samples=samples, parallel=parallel, seed=seed, temperature=1.5
    )
    candidates = run(torch_engine.generate(ir, options)).candidates
    assert candidates
    for candidate in candidates:
        assert validate_pass_list(candidate.pass_list) == candidate.pass_list
        assert all(name in PASS_NAMES or name in META_FLAGS for name in candidate.pass_list)
