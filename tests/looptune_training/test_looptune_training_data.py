"""The LoopTune training data (looptune_training/: collect, measure_templates): one training shape's measured
schedules, in the format the cost model and tree Q-learning read. Real kernels, compiled and timed here."""

from __future__ import annotations

import time

from optserve.looptune_training.collect import collect_shape
from optserve.looptune_training.measure_templates import measure_templates
from optserve.looptune_training.templates import nest_structure

SHAPE = "mm64_64_64"  # the smallest training shape
REGISTER_TILE = ["split_4", "down", "swap_down", "down", "split_16", "swap_up", "swap_up"]


def test_a_collected_shape_holds_every_nest_its_searches_measured():
    """Beam search and random walks on one shape: each measured compute nest is recorded once per
    measurement with its GFLOPS, written `index:size:tail;...` (what the cost model trains on)."""
    shape = collect_shape((SHAPE, 0.3, 0.2, time.time() + 600))
    assert shape["shape"] == SHAPE and shape["nests"]
    assert shape["beam"]["gflops"] > 0 and shape["random"]["gflops"] > 0
    for nest, gflops in shape["nests"]:
        assert nest_structure(nest) and gflops > 0


def test_a_shape_past_the_collections_budget_is_not_searched():
    assert collect_shape((SHAPE, 0.3, 0.2, time.time())) is None


def test_templates_are_measured_by_their_final_schedule_and_an_unavailable_one_is_none():
    """A template whose actions the shape does not allow has no final schedule: None, and no nest."""
    unavailable = ["split_4"] * 4  # m 64 split by 4 three times is 4 x 4 x 4: no fourth split
    measured = measure_templates((SHAPE, [REGISTER_TILE, unavailable, []], time.time() + 600, 1))
    tiled, missing, base = measured["gflops"]
    assert tiled > 0 and base > 0 and missing is None
    assert len(measured["nests"]) == 2 and all(g > 0 for _, g in measured["nests"])
