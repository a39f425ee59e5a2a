"""The order of an Optimize answer (serve/optimize/ranking.py): cheapest first, the baseline first on a tie,
failures last, and the measured candidate as it goes on the wire."""

from __future__ import annotations

import random

from optserve.compiler.function_lists import FunctionLists
from optserve.compiler.passes import to_opt_pipeline
from optserve.compiler.pipeline import OZ
from optserve.serve.optimize.ranking import client_code, failed, measured, rank
from optserve.serve.schemas import CandidateSource

MODEL, CORESET, OZ_SOURCE = CandidateSource.MODEL, CandidateSource.CORESET, CandidateSource.OZ


def test_the_cheapest_candidate_is_ranked_first():
    oz = measured(OZ, 20, OZ_SOURCE)
    model = measured(("sroa",), 15, MODEL, logprob=-3.0)
    assert rank([oz, model]) == [model, oz]


def test_on_a_tie_the_baseline_comes_first_the_client_before_oz():
    client, oz = client_code(20), measured(OZ, 20, OZ_SOURCE)
    model = measured(("sroa",), 20, MODEL, logprob=-0.1)
    assert rank([model, oz, client]) == [client, oz, model]


def test_among_equal_costs_of_one_source_the_likelier_comes_first():
    likely = measured(("sroa",), 10, MODEL, logprob=-0.5)
    unlikely = measured(("instcombine",), 10, MODEL, logprob=-2.0)
    assert rank([unlikely, likely]) == [likely, unlikely]


def test_failures_go_last_whatever_they_would_have_cost():
    broken = measured(("adce",), None, MODEL, "timeout", logprob=-0.01)
    errored = measured(("dse",), 1, MODEL, "crashed", logprob=-0.01)
    slow = measured(("sroa",), 99, CORESET)
    assert rank([broken, errored, slow])[0] is slow
    assert failed(broken) and failed(errored) and not failed(slow)


def test_an_unmeasured_client_baseline_ranks_below_every_compiled_candidate_and_above_every_failure():
    client = client_code(None)  # client_compares: the client compares the answer with its own object
    compiled, broken = measured(("sroa",), 10_000, MODEL), measured(("adce",), None, MODEL, "crashed")
    assert rank([broken, client, compiled]) == [compiled, client, broken]
    assert client.cost == -1 and not failed(client)


def test_the_order_is_total_so_equal_candidates_rank_the_same_whatever_they_came_in():
    candidates = [measured((name,), 5, CORESET) for name in ("sroa", "sink", "adce", "dce")]
    shuffles = [random.Random(seed).sample(candidates, 4) for seed in range(8)]
    orders = {tuple(c.passes[0] for c in rank(shuffle)) for shuffle in shuffles}
    assert orders == {("adce", "dce", "sink", "sroa")}


def test_a_failed_candidate_is_sent_with_cost_minus_one_and_an_error():
    candidate = measured(("sroa",), None, MODEL)
    assert (candidate.cost, candidate.error) == (-1, "no cost")
    assert candidate.pipeline == to_opt_pipeline(("sroa",))  # what it was, in `opt -passes=` syntax


def test_a_per_function_candidate_compiles_again_from_its_lists_which_stay_off_the_wire():
    lists = FunctionLists.of({"f": ("sroa",), "g": ("-Oz",)}, grouped=True)
    candidate = measured((), 7, CandidateSource.PER_FUNCTION, function_lists=lists)
    assert candidate.job is lists
    assert candidate.passes == [] and candidate.pipeline == ""
    assert set(candidate.function_passes) == {"f", "g"}
    sent = candidate.model_dump_json()
    assert "function_lists" not in sent and "grouped" not in sent
    assert measured(("sroa",), 7, MODEL).job == ("sroa",)
