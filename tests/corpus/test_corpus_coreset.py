"""Coreset selection: greedy coverage over measured label costs, in a deterministic order."""

from __future__ import annotations

from optserve.corpus.coreset import known_costs, select


def test_greedy_picks_the_list_that_saves_most_then_what_adds_most():
    a, b, c = ("-O2",), ("-Os", "dce"), ("-Oz", "mergefunc")
    examples = [
        (100, {a: 90, b: 95}),  # a saves 10%
        (100, {a: 90, b: 95}),
        (10, {b: 5, c: 9}),  # b saves 50% here
        (10, {c: 9}),
    ]
    chosen = select(examples, k=5)
    # b saves 0.05 + 0.05 + 0.5; then a and c each add 0.1 more: the shorter list first
    assert [p for p, _, _ in chosen] == [b, a, c]
    assert chosen[0][2] == 3 and abs(chosen[0][1] - 0.6) < 1e-9
    assert select(examples, k=1) == chosen[:1]  # a prefix is the best smaller coreset found


def test_weighted_by_bytes_the_large_examples_decide():
    a, b = ("-O2",), ("-Os", "dce")
    examples = [(1000, {a: 900, b: 990}), (10, {b: 5}), (10, {b: 5})]  # a: 100 B; b: 10 + 5 + 5 B
    assert [p for p, _, _ in select(examples, k=1)] == [b]  # relative: b saves 1.01 of an example
    assert select(examples, k=2, relative=False) == [(a, 100, 1), (b, 10, 2)]  # b adds only the small two


def test_no_gain_no_list_and_costs_come_from_seeds_and_top_lists():
    assert select([(50, {("-O1",): 50})]) == []
    record = {"oz": 40, "seeds": "fp", "seed_costs": [38, None], "top": [[37, ["-O1", "dce"]]]}
    costs = known_costs(record, {"fp": [["-Os"], ["-O3"]]})
    assert costs == {("-Os",): 38, ("-O1", "dce"): 37, ("-Oz",): 40}


def test_lists_with_a_pass_the_vocabulary_dropped_are_not_servable():
    # newgvn miscompiles real code (compiler/passes.py): labels found with it must not reach the coreset
    from optserve.compiler.passes import PassListError, validate_pass_list
    from optserve.corpus.coreset import servable

    assert servable(["-O1", "dse"]) and servable(["sroa"])
    assert not servable(["instcombine", "newgvn", "sroa"])
    try:
        validate_pass_list(["newgvn"])
    except PassListError as err:
        assert "unknown pass 'newgvn'" in str(err)
    else:
        raise AssertionError("newgvn is still in the vocabulary")
