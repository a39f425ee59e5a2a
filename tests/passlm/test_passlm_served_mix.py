"""passlm/evaluation/served_mix.py: the served mixes of a model's and the coreset's measured candidates."""

import json

from optserve.passlm.evaluation import served_mix as mix


def _record(function, method, costs, oz=10, unoptimized=20, skipped=None):
    return {
        "function": function,
        "method": method,
        "costs": costs,
        "oz": oz,
        "unoptimized": unoptimized,
        "skipped": skipped,
    }


def test_a_failed_greedy_list_counts_unoptimized_and_each_mix_takes_the_cheapest_candidate():
    model = {"greedy": _record("f", "greedy", [None]), "priority": _record("f", "priority", [12, 9, None, 8])}
    coreset = _record("f", "coreset", [11, 7])
    costs = mix.function_costs(model, coreset)
    assert costs["greedy"] == 20 and costs["greedy + floor"] == 10
    assert costs["served greedy"] == 10  # the coreset's first list (11) is not below -Oz
    assert costs["PS@10 + floor"] == 8 and costs["PS@5 + coreset@5"] == 7


def test_functions_a_journal_skipped_are_left_out_of_every_row(tmp_path):
    lines = [
        _record("a", "greedy", [8]),
        _record("a", "priority", [8, 6]),
        _record("a", "coreset", [9]),
        _record("b", "greedy", [], skipped="prompt too long"),
        _record("b", "priority", []),
        _record("b", "coreset", [5]),
    ]
    journal = tmp_path / "j.journal.jsonl"
    journal.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    records = mix.read_journal(journal)
    count, table = mix.mixes({"m": records}, records)
    assert count == 1
    assert table["m"]["greedy"] == 20.0 and table["m"]["PS@10 + floor"] == 40.0
