"""Schedule templates and Q-learning on the measured template tree (looptune_training/: templates, tree_q)."""

from __future__ import annotations

import math

import numpy as np
import torch

from optserve.kernels.schedule import Loop
from optserve.kernels.spec import LoopNestSpec
from optserve.looptune_training.templates import (
    candidate_pool,
    greedy_cover,
    nest_structure,
    padded,
    play,
    reachable_structures,
    structure,
)
from optserve.looptune_training.tree_q import TemplateData, concat, fit, offline_score, tree_rows
from optserve.policies.env import ACTIONS, EPISODE_STEPS
from optserve.policies.policy import QNetwork, rollout

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
REGISTER_TILE = ["split_4", "down", "swap_down", "down", "split_16", "swap_up", "swap_up"]


def matmul(m=128, k=64, n=96) -> LoopNestSpec:
    return LoopNestSpec.parse(MATMUL, {"m": m, "k": k, "n": n})


def test_structure_names_order_and_split_factors_without_shape_sizes():
    # m8 n6 k64 m16... written by hand: outer loops by index name, inner loops with their size
    nest = (Loop("m", 32), Loop("n", 6), Loop("k", 64), Loop("m", 4), Loop("n", 16))
    assert structure(nest) == "m n k m4 n16"
    assert nest_structure("k:4:0;k:4:0;m:80:0;k:16:0;n:96:0") == "k k4 m k16 n"
    states = play(matmul(), REGISTER_TILE)
    assert structure(states[-1].schedule.compute) == "m n k m4 n16"


def test_reachable_structures_keep_the_shortest_sequence():
    found = reachable_structures(matmul(), depth=3)
    assert found["m k n"] == ()
    assert found["m m4 k n"] == ("split_4",)
    assert found["k m n"] == ("swap_down",)
    assert all(len(actions) <= 3 for actions in found.values())
    pool = candidate_pool(found, "n", max_splits=1)
    assert ("split_4",) in pool and ("down", "swap_down") not in pool  # m n k: innermost k, not vectorizable
    assert ("down", "down", "split_16") in pool  # m k n n16: a split innermost n is still vectorizable


def test_play_stops_where_an_action_is_unavailable_and_padding_keeps_the_schedule():
    spec = matmul(64, 64, 64)
    assert play(spec, ["split_16", "split_8"]) is None  # the outer m loop has 4 iterations: no split by 8
    states = play(spec, REGISTER_TILE)
    episode = padded(REGISTER_TILE, states[-1])
    assert len(episode) == EPISODE_STEPS and episode[: len(REGISTER_TILE)] == REGISTER_TILE
    assert set(episode[len(REGISTER_TILE) :]) <= {"up", "down"}
    assert play(spec, episode)[-1].schedule == states[-1].schedule


def test_greedy_cover_picks_templates_that_complement_each_other():
    log_gflops = np.log(
        np.array(
            [
                [10.0, 10.0, 10.0, 10.0],  # decent everywhere
                [40.0, 40.0, 5.0, 5.0],  # best on the first half
                [5.0, 5.0, 40.0, 40.0],  # best on the second half
            ]
        )
    )
    assert greedy_cover(log_gflops, 2) == [1, 2]
    log_gflops[2, 2:] = -math.inf  # unavailable there: the decent one fills the gap
    assert greedy_cover(log_gflops, 2) == [1, 0]


def test_tree_targets_are_the_best_value_measured_below_each_action():
    spec = matmul()
    templates = [REGISTER_TILE, ["split_4"], []]
    rows = tree_rows(spec, templates, np.array([0.5, 0.2, -0.7]))
    root = 0  # the base state is the first node
    assert rows.target[root, ACTIONS.index("split_4")] == np.float32(0.5)  # both templates start with it
    assert rows.target[root, ACTIONS.index("down")] == np.float32(-0.7)  # the base's padding
    assert rows.best[root] == ACTIONS.index("split_4")
    measured = ~np.isnan(rows.target)
    assert (rows.mask[measured.any(1)] | ~measured[measured.any(1)]).all()  # measured actions are available


def test_q_learning_on_the_tree_follows_the_best_template_on_every_shape():
    shapes = [f"mm{m}_64_96" for m in (64, 96, 128, 160)]

    def spec_of(name):
        m, k, n = (int(x) for x in name.removeprefix("mm").split("_"))
        return matmul(m, k, n)

    templates = [REGISTER_TILE, ["split_4"], ["swap_down"], []]
    value = np.array([[0.6, 0.1, -0.5, -0.2]] * len(shapes))
    data = TemplateData(shapes, templates, value, passes=1, meta={})
    rows = concat([tree_rows(spec_of(s), templates, value[i]) for i, s in enumerate(shapes)])
    torch.manual_seed(0)
    q = QNetwork([64, 64])
    losses = fit(q, rows, epochs=60, lr=3e-3, batch=64, margin=0.05, seed=0)
    assert losses[-1] < losses[0] / 5
    for name in shapes:
        assert rollout(q, spec_of(name)).actions[: len(REGISTER_TILE)] == REGISTER_TILE
    score = offline_score(q, data, list(range(len(shapes))), spec_of)
    assert score["off_tree"] == 0 and score["geomean_fraction_of_best_template"] == 1.0
    assert math.isclose(score["mean_speedup_over_base"], math.exp(0.6 - -0.2), rel_tol=1e-6)
