"""A client's baseline (`baseline_cost`, optcc's clang object) and `skip_input_cost`: what the Optimize flow
then compiles, which candidate wins, and how the answer is cached (Ray-free Optimizer, real compiles)."""

from __future__ import annotations

import asyncio
import time

import pytest

from optserve.compiler.cache import ResultCache
from optserve.compiler.pipeline import evaluate
from optserve.serve import schemas
from tests.serve.flow_helpers import ScriptedGenerator, optimize


class CountingCompiler:
    """The real pool, noting every pass list it is asked to compile."""

    def __init__(self, pool):
        self.pool = pool
        self.compiled: list[tuple[str, ...]] = []

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        self.compiled += [tuple(p) for p in pass_lists]
        return await self.pool.evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)

    async def run_async(self, *args, **kwargs):  # the service's intake, as the pool runs it
        return await self.pool.run_async(*args, **kwargs)


class SlowOzCompiler(CountingCompiler):
    """The real pool, with -Oz's compile taking `delay_s` longer (as a long unit's -Oz does)."""

    def __init__(self, pool, delay_s: float):
        super().__init__(pool)
        self.delay_s = delay_s

    async def evaluate_async(
        self, ir, pass_lists, objective, want_ir=False, want_object=False, deadline=None
    ):
        if [tuple(p) for p in pass_lists] == [("-Oz",)]:
            await asyncio.sleep(self.delay_s)
        return await super().evaluate_async(ir, pass_lists, objective, want_ir, want_object, deadline)


def test_a_client_baseline_compiles_oz_beside_the_model_but_not_the_input(pool, unrolled_loop_ir):
    def compiled(**options) -> tuple[list, schemas.OptimizeResponse]:
        compiler = CountingCompiler(pool)
        response = optimize(ScriptedGenerator([("sroa",)]), compiler, schemas.OptimizeRequest(**options))
        return compiler.compiled, response

    lists, own = compiled(ir=unrolled_loop_ir)
    assert sorted(lists) == [(), ("-Oz",), ("sroa",)] and not own.oz_skipped  # the input, -Oz, the model's
    lists, answer = compiled(ir=unrolled_loop_ir, baseline_cost=own.oz_cost)
    assert sorted(lists) == [("-Oz",), ("sroa",)]  # -Oz and the model's list, not the input
    assert not answer.oz_skipped and (answer.oz_cost, answer.input_cost) == (own.oz_cost, -1)
    # -Oz ties the client's cost: the client's code ranks first of the two
    assert [c.source for c in answer.candidates] == ["model", "client_baseline", "oz"]
    assert answer.best.cost == own.best.cost and answer.best.passes == ["sroa"]
    assert answer.improvement_over_oz_pct == pytest.approx(own.improvement_over_oz_pct)


def test_skip_input_cost_compiles_oz_and_the_model_s_lists_but_not_the_input(pool, unrolled_loop_ir):
    """optcc compares the answer's object with its clang's itself: the input's cost is a compile it does not
    use. -Oz stays the baseline, and the answer (its input_cost -1) is complete enough to be cached."""
    cache, compiler = ResultCache(10), CountingCompiler(pool)
    request = schemas.OptimizeRequest(ir=unrolled_loop_ir, skip_input_cost=True)
    answer = optimize(ScriptedGenerator([("sroa",)]), compiler, request, cache)
    assert sorted(compiler.compiled) == [("-Oz",), ("sroa",)]  # no () list: the input was not compiled
    assert answer.input_cost == -1 and answer.oz_cost > 0 and not answer.oz_skipped
    assert answer.best.cost <= answer.oz_cost
    assert optimize(ScriptedGenerator([("sroa",)]), compiler, request, cache).cached


def test_a_candidate_is_best_only_when_it_costs_less_than_the_client_baseline(pool, unrolled_loop_ir):
    sroa = evaluate(unrolled_loop_ir, ("sroa",), "instruction_count").cost
    oz = evaluate(unrolled_loop_ir, ("-Oz",), "instruction_count").cost
    assert sroa < oz

    def answer(baseline_cost: int) -> schemas.OptimizeResponse:
        request = schemas.OptimizeRequest(
            ir=unrolled_loop_ir, baseline_cost=baseline_cost, return_object=True
        )
        return optimize(ScriptedGenerator([("sroa",)]), pool, request)

    beaten = answer(sroa + 1)
    assert beaten.best.passes == ["sroa"] and beaten.best.cost == sroa
    assert beaten.object_code.startswith(b"\x7fELF")  # the candidate's object, compiled for the answer
    for baseline_cost in (sroa, sroa - 1):  # a tie keeps the client's code, as it keeps -Oz
        kept = answer(baseline_cost)
        assert kept.best.source == "client_baseline" and kept.best.cost == baseline_cost
        assert kept.best.passes == [] and kept.object_code is None  # the client holds that code
        assert [c.cost for c in kept.candidates] == [baseline_cost, sroa, oz]
        assert kept.improvement_over_oz_pct == 0.0


def test_with_a_client_baseline_the_strictly_smallest_of_oz_and_the_model_wins(pool, sum_ir):
    """The answer is the cheapest of {-Oz, the model's candidates} when it costs less than the client's,
    else the client's; -Oz's object comes from its one compile beside the model."""
    oz = evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    o0 = evaluate(sum_ir, ("-O0",), "instruction_count").cost
    assert oz < o0  # the model proposes a list worse than -Oz

    def answer(baseline_cost: int) -> tuple[list, schemas.OptimizeResponse]:
        compiler = CountingCompiler(pool)
        request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=baseline_cost, return_object=True)
        return compiler.compiled, optimize(ScriptedGenerator([("-O0",)]), compiler, request)

    for baseline_cost, winner in (
        (oz + 1, "oz"),
        (10 * o0, "oz"),
        (oz, "client_baseline"),
        (1, "client_baseline"),
    ):
        lists, response = answer(baseline_cost)
        assert response.best.source == winner, baseline_cost
        assert sorted(lists) == [("-O0",), ("-Oz",)]  # each once: -Oz's win needs no second compile
        assert response.oz_cost == oz and not response.oz_skipped and not response.deadline_hit
        if winner == "oz":
            assert response.best.cost == oz and response.object_code.startswith(b"\x7fELF")
        else:
            assert response.best.cost == baseline_cost and response.object_code is None


def test_a_model_list_equal_to_oz_is_not_compiled_twice(pool, sum_ir):
    compiler = CountingCompiler(pool)
    request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=10_000)
    response = optimize(ScriptedGenerator([("-Oz",)]), compiler, request)
    assert compiler.compiled == [("-Oz",)]
    assert response.best.passes == ["-Oz"] and response.best.source == "oz"
    assert response.best.cost == evaluate(sum_ir, ("-Oz",), "instruction_count").cost


def test_with_a_client_baseline_the_answer_waits_for_oz(pool, sum_ir):
    """-Oz slower than the model's candidates is still waited for, within the deadline: the answer does not
    depend on which finished first."""
    oz = evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=oz + 1, deadline_s=10)
    response = optimize(ScriptedGenerator([("-O0",)]), SlowOzCompiler(pool, 1.0), request)
    assert response.best.source == "oz" and response.best.cost == oz and response.oz_cost == oz
    assert not response.deadline_hit and not response.oz_skipped


def test_oz_not_finishing_by_the_deadline_leaves_the_client_baseline_or_the_model(pool, sum_ir):
    oz = evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    o0 = evaluate(sum_ir, ("-O0",), "instruction_count").cost
    for baseline_cost, winner in ((oz + 1, "client_baseline"), (o0 + 1, "model")):
        request = schemas.OptimizeRequest(ir=sum_ir, baseline_cost=baseline_cost, deadline_s=0.5)
        cache = ResultCache(10)
        started = time.monotonic()
        response = optimize(ScriptedGenerator([("-O0",)]), SlowOzCompiler(pool, 5.0), request, cache)
        assert time.monotonic() - started < 2.0
        assert response.deadline_hit and response.oz_skipped and response.oz_cost == -1
        assert response.best.source == winner and "oz" not in [c.source for c in response.candidates]
        assert len(cache) == 0  # an answer cut short is not cached


def test_a_deadline_with_a_client_baseline_answers_that_baseline_not_an_error(pool, add_ir):
    generator = ScriptedGenerator([("sroa",)], delay_s=5.0)
    request = schemas.OptimizeRequest(ir=add_ir, baseline_cost=1, deadline_s=0.3)
    cache = ResultCache(10)
    response = optimize(generator, pool, request, cache)
    assert response.deadline_hit and response.best.source == "client_baseline" and response.best.cost == 1
    assert [c.source for c in response.candidates] == ["client_baseline", "oz"]  # -Oz finished, the model not
    assert response.timings.total_s < 2.0 and len(cache) == 0


def test_an_answer_to_a_client_baseline_is_cached_under_that_baseline(pool, sum_ir):
    cache = ResultCache(10)
    generator = ScriptedGenerator([("-O2",)])
    first = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=10_000), cache)
    again = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=10_000), cache)
    other = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=1), cache)
    assert not first.cached and again.cached and again.oz_cost == first.oz_cost > 0
    assert again.best.cost == first.best.cost < 10_000
    assert not other.cached and other.best.source == "client_baseline"
    cached_baseline = optimize(generator, pool, schemas.OptimizeRequest(ir=sum_ir, baseline_cost=1), cache)
    assert cached_baseline.cached and cached_baseline.best.source == "client_baseline"
