"""The vLLM backend (CPU build) returns the same candidates as the torch backend (same model and request).

One AsyncLLM for the whole module (engine start takes ~30-60 s here), driven from one event loop.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from optserve.compiler.passes import validate_pass_list
from optserve.engine.interface import SamplingOptions, Strategy
from tests.engine.engine_helpers import assert_same_candidates

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def event_loop_for_vllm():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def vllm_engine(tiny_model_dir, event_loop_for_vllm):
    from optserve.engine.engine import ModelEngine

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    async def start():
        return ModelEngine.load(tiny_model_dir, backend="vllm")

    engine = event_loop_for_vllm.run_until_complete(start())
    yield engine
    event_loop_for_vllm.run_until_complete(engine.close())


def test_vllm_and_torch_return_the_same_candidates(vllm_engine, torch_engine, event_loop_for_vllm, sample_ir):
    requests = [
        SamplingOptions(),
        SamplingOptions(strategy=Strategy.PRIORITY, samples=8),
        SamplingOptions(strategy=Strategy.PRIORITY, samples=8, parallel=3, max_branch=3),
    ]
    for options in requests:
        from_vllm = event_loop_for_vllm.run_until_complete(vllm_engine.generate(sample_ir, options))
        from_torch = asyncio.run(torch_engine.generate(sample_ir, options))
        assert_same_candidates(from_vllm, from_torch)
        for a, b in zip(from_vllm.candidates, from_torch.candidates, strict=True):
            assert (a.predicted_cost_before, a.predicted_cost_after) == (
                b.predicted_cost_before,
                b.predicted_cost_after,
            )


def test_vllm_nucleus_candidates_are_valid_and_unique(vllm_engine, event_loop_for_vllm, sample_ir):
    options = SamplingOptions(strategy=Strategy.NUCLEUS, samples=6, temperature=1.2, seed=3)
    generation = event_loop_for_vllm.run_until_complete(vllm_engine.generate(sample_ir, options))
    lists = [c.pass_list for c in generation.candidates]
    assert lists and len(lists) == len(set(lists))
    assert all(validate_pass_list(p) == p for p in lists)
    again = event_loop_for_vllm.run_until_complete(vllm_engine.generate(sample_ir, options))
    assert [c.pass_list for c in again.candidates] == lists  # seeded
