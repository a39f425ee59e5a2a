"""The unit coreset: lists chosen by bytes saved on measured function modules, written as a coreset."""

from __future__ import annotations

import json
from pathlib import Path

from optserve.corpus.unit_coreset import OBJECTIVE, build, candidate_lists, held_out_check, saved
from optserve.engine.coreset import Coreset

STORE = Path(__file__).resolve().parents[2] / "data" / "labels" / "real"
A, B, C = ("-O1",), ("sroa", "jump-threading"), ("-Oz", "loop-rotate")


def _rows() -> list[dict]:
    # per module: [-Oz, A, B, C]; None: that list failed to compile there
    return [
        {"id": "u1", "package": "p1", "costs": {"f": [1000, 950, 990, None], "g": [10, 12, 5, 5]}},
        {"id": "u2", "package": "p2", "costs": {"h": [200, 200, 180, 170], "dead": [None, 1, 1, 1]}},
    ]


def test_lists_are_chosen_over_labels_and_modules_and_written_as_a_coreset_the_service_loads(tmp_path):
    coreset = build(_rows(), [A, B, C], prior=[], weight=1.0, k=3)
    # C saves 0.5 of g and 0.15 of h, B 0.5 + 0.1 + 0.01 of f, A 0.05; then A adds 0.05, B nothing
    assert [tuple(item["passes"]) for item in coreset["objectives"][OBJECTIVE]] == [C, A]
    assert coreset["selected_from"][OBJECTIVE]["function_modules"] == 3  # `dead` has no -Oz cost
    path = tmp_path / "units.json"
    path.write_text(json.dumps(coreset))
    loaded = Coreset.load(path)
    assert loaded.first(OBJECTIVE, 10) == (C, A) and loaded.version == coreset["version"]
    labels = [("p3", 100, {B: 10})]  # a label where B saves 0.9: with it, B comes first
    assert build(_rows(), [A, B, C], prior=labels, weight=1.0, k=1)["objectives"][OBJECTIVE][0]["passes"] == [
        "sroa",
        "jump-threading",
    ]


def test_saved_is_the_best_of_oz_and_the_lists_per_module():
    examples = [(1000, {A: 950}), (10, {A: 12, B: 5})]
    assert saved(examples, [A]) == 50 / 1010
    assert saved(examples, [A, B]) == 55 / 1010
    assert saved(examples, []) == 0.0


def test_held_out_check_compares_the_choices_on_packages_left_out():
    lines = held_out_check(_rows(), [A, B, C], [B], prior=[], weight=1.0, k=2)
    assert [line.split(",")[1].split(":")[0] for line in lines] == [
        " coreset's first 2",
        " modules alone",
        " labels alone",
        " labels + modules x1",
    ]


def test_the_pool_starts_with_the_coreset_and_holds_only_servable_lists_other_than_oz():
    coreset = Coreset(version="t", lists={OBJECTIVE: (B, A)})
    pool = candidate_lists(STORE, coreset)
    assert pool[:2] == [B, A] and ("-Oz",) not in pool and len(pool) == len(set(pool)) > 2
