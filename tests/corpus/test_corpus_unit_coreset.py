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


def test_lists_are_chosen_by_bytes_saved_and_written_as_a_coreset_the_service_loads(tmp_path):
    coreset = build(_rows(), [A, B, C], k=3)
    # A saves 50 B (f); then C 30 (h) + 5 (g); then B adds nothing more
    assert [tuple(item["passes"]) for item in coreset["objectives"][OBJECTIVE]] == [A, C]
    assert coreset["selected_from"][OBJECTIVE]["function_modules"] == 3  # `dead` has no -Oz cost
    path = tmp_path / "units.json"
    path.write_text(json.dumps(coreset))
    loaded = Coreset.load(path)
    assert loaded.first(OBJECTIVE, 10) == (A, C) and loaded.version == coreset["version"]


def test_saved_is_the_best_of_oz_and_the_lists_per_module():
    examples = [(1000, {A: 950}), (10, {A: 12, B: 5})]
    assert saved(examples, [A]) == 50 / 1010
    assert saved(examples, [A, B]) == 55 / 1010
    assert saved(examples, []) == 0.0


def test_held_out_check_chooses_on_one_half_of_the_packages_and_measures_on_the_other():
    lines = held_out_check(_rows(), [A, B, C], [B], k=2)
    assert len(lines) == 2 and all("chosen on 1 packages, measured on 1" in line for line in lines)


def test_the_pool_starts_with_the_coreset_and_holds_only_servable_lists_other_than_oz():
    coreset = Coreset(version="t", lists={OBJECTIVE: (B, A)})
    pool = candidate_lists(STORE, coreset)
    assert pool[:2] == [B, A] and ("-Oz",) not in pool and len(pool) == len(set(pool)) > 2
