"""optserve.compiler.autotune: random search with -Oz as the floor, then minimization."""

from __future__ import annotations

import random

import pytest

from optserve.compiler.autotune import (
    _Evaluator,
    _minimize,
    _ranked,
    autotune,
    local_search,
    mutate,
    random_pass_list,
)
from optserve.compiler.cost import Objective
from optserve.compiler.ir import split_functions
from optserve.compiler.passes import META_FLAGS, validate_pass_list
from optserve.compiler.pipeline import evaluate, oz_cost
from optserve.compiler.workers import CompilerPool


@pytest.fixture(scope="module")
def functions(c_ir) -> dict[str, str]:
    return {name: module for ir in c_ir.values() for name, module in split_functions(ir)}


def test_random_lists_are_valid_and_seeded():
    rng = random.Random(5)
    lists = [random_pass_list(rng, 8) for _ in range(300)]
    assert all(validate_pass_list(pass_list) == pass_list for pass_list in lists)
    assert all(1 <= len([p for p in pass_list if p not in META_FLAGS]) <= 8 for pass_list in lists)
    assert lists == [random_pass_list(random.Random(5), 8) for _ in range(1)] + lists[1:]


@pytest.mark.parametrize("objective", list(Objective))
def test_result_is_never_worse_than_oz_and_its_cost_is_real(functions, objective):
    for name in ("matmul", "count_words", "centroid", "newton_sqrt"):
        result = autotune(functions[name], budget=60, objective=objective, seed=1)
        assert result.oz_cost == oz_cost(functions[name], objective)
        assert result.best_cost <= result.oz_cost
        assert evaluate(functions[name], result.best_pass_list, objective).cost == result.best_cost
        assert result.search_compilations <= 60
        assert result.compilations == 2 + result.search_compilations + result.minimization_compilations


def test_finds_the_unrolling_that_oz_should_not_do(functions):
    """-Oz fully unrolls newton_sqrt's loop (no minsize on -O0 IR); lists without -Oz/-O2 are smaller."""
    result = autotune(functions["newton_sqrt"], budget=50, objective="text_size", seed=0)
    assert result.best_cost < result.oz_cost and result.improvement_over_oz > 0.3


def test_same_seed_same_result_and_pool_matches_in_process(functions):
    ir = functions["count_words"]
    first = autotune(ir, budget=80, objective="instruction_count", seed=7)
    assert (
        autotune(ir, budget=80, objective="instruction_count", seed=7).best_pass_list == first.best_pass_list
    )
    with CompilerPool(processes=2, timeout_s=30) as pool:
        pooled = autotune(ir, budget=80, objective="instruction_count", seed=7, pool=pool, batch_size=16)
    assert (pooled.best_cost, pooled.best_pass_list) == (first.best_cost, first.best_pass_list)


def test_minimization_never_makes_a_list_worse_and_leaves_no_removable_pass(functions):
    rng = random.Random(11)
    for name in ("matmul", "centroid", "sum_varargs"):
        evaluator = _Evaluator(functions[name], Objective.INSTRUCTION_COUNT, None)
        for _ in range(4):
            start = random_pass_list(rng, 6)
            (start_cost,) = evaluator.costs_of([start])
            cost, minimized = _minimize(evaluator, start_cost, start)
            assert cost <= start_cost and len(minimized) <= len(start)
            assert evaluator.costs_of([minimized]) == [cost]
            shorter = [minimized[:i] + minimized[i + 1 :] for i in range(len(minimized))]
            assert all(c is None or c > cost for c in evaluator.costs_of(shorter))


def test_progress_is_reported_and_time_limit_stops_the_search(functions):
    seen = []
    result = autotune(
        functions["matmul"],
        budget=10_000,
        time_limit_s=0.5,
        progress=lambda *state: seen.append(state),
        seed=2,
    )
    assert result.search_compilations < 10_000 and result.seconds < 10
    assert seen and seen[-1][0] == result.search_compilations and seen[-1][1] == 10_000
    assert all(best >= result.best_cost for _, _, best in seen)


def test_zero_budget_is_just_oz_and_minimization(functions):
    result = autotune(functions["clamp"], budget=0)
    assert result.search_compilations == 0 and result.best_cost <= result.oz_cost


def test_mutations_are_valid_lists_with_one_leading_meta_flag():
    rng = random.Random(3)
    pass_list = ("-Oz", "instcombine")
    for _ in range(500):
        pass_list = mutate(pass_list, rng, max_passes=8)
        assert validate_pass_list(pass_list) == pass_list and pass_list
        assert all(p not in META_FLAGS for p in pass_list[1:])


@pytest.mark.parametrize("objective", list(Objective))
def test_local_search_respects_the_budget_and_reports_real_costs(functions, objective):
    seeds = [("-Os",), ("-O2", "mergefunc"), ("-Oz",)]
    for name in ("matmul", "count_words", "newton_sqrt"):
        result = local_search(functions[name], budget=40, objective=objective, seeds=seeds, seed=1, top_k=4)
        assert result.oz_cost == oz_cost(functions[name], objective)
        assert result.best_cost <= result.oz_cost and result.best_cost == result.top[0][0]
        assert evaluate(functions[name], result.best_pass_list, objective).cost == result.best_cost
        assert [cost for cost, _ in result.top] == sorted(cost for cost, _ in result.top)
        assert len({p for _, p in result.top}) == len(result.top) <= 4
        assert result.seed_costs[2] == result.oz_cost  # the seed list -Oz costs what the floor costs
        assert result.seed_costs[0] == evaluate(functions[name], ("-Os",), objective).cost
        # the search stops at the budget; minimization may add a few compiles after it
        assert 40 <= result.compilations <= 40 + len(result.best_pass_list) ** 2


def test_a_tie_with_oz_ranks_oz_first_and_o0_is_never_an_answer():
    costs = {("-O1",): 10, ("-Oz",): 10, ("-O2", "dce"): 11, (): 5, ("-O3",): None}
    assert _ranked(costs) == [(10, ("-Oz",)), (10, ("-O1",)), (11, ("-O2", "dce"))]


def test_local_search_beats_random_search_at_equal_budget_on_a_known_case(functions):
    """newton_sqrt: -Oz unrolls; local search from a good seed finds at least what random search finds."""
    ir = functions["newton_sqrt"]
    random_result = autotune(ir, budget=30, objective="text_size", seed=0)
    local = local_search(ir, budget=32, objective="text_size", seeds=[random_result.best_pass_list], seed=0)
    assert local.best_cost <= random_result.best_cost < local.oz_cost
