"""Tile actions: the Q-network's larger action space builds valid, exact schedules, is masked by the
target, rides in bundles and leads the decision (its training: tests/looptune_training/)."""

from __future__ import annotations

import json

import pytest
import torch

from optserve.kernels.codegen import Target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.looptune_training.suites import KINDS, case_from_name
from optserve.policies.env import AgentState, Evaluator
from optserve.policies.policy import PolicyError, QNetwork, load_bundle, rollout, save_bundle
from optserve.policies.tile_actions import apply_tile, is_tile_action_space, template_of, tile_mask
from optserve.policies.tiles import policy_tiles, tile_action_space
from tests.kernels.test_kernels_codegen import run_and_compare

AVX512 = Target(vector_widths=(16, 8), accumulator_registers=28)
AVX2 = Target(vector_widths=(8,), accumulator_registers=12)
# A·B^T with tails at every level: packed and unpacked actions build different nests here
SMALL_BT = LoopNestSpec.parse("C[m,n] += A[m,k] * B[n,k]", {"m": 19, "k": 37, "n": 23})


def network_preferring(actions: list[str], favourite: list[str]) -> QNetwork:
    """A Q-network whose Q-values rank `favourite` first (in that order), whatever the state."""
    q = QNetwork([4], actions)
    with torch.no_grad():
        last = q.net[-1]
        last.weight.zero_()
        last.bias.zero_()
        for rank, action in enumerate(favourite):
            last.bias[actions.index(action)] = len(favourite) - rank
    return q


def test_every_tile_action_builds_a_valid_schedule_that_matches_numpy():
    seen = set()
    for action in tile_action_space():
        schedule = apply_tile(SMALL_BT, action, AVX512)
        schedule.check(SMALL_BT)
        if schedule.compute_key() not in seen:  # packed and unpacked twins differ on A·B^T
            seen.add(schedule.compute_key())
            run_and_compare(SMALL_BT, schedule)
    assert len(seen) > len(tile_action_space()) // 2


def test_tile_action_names_round_trip_and_bad_ones_are_refused():
    actions = tile_action_space()
    assert is_tile_action_space(actions) and len(set(actions)) == len(actions)
    assert all(a == "tile:" + template_of(a).name() for a in actions)
    assert not is_tile_action_space(["up", *actions])
    with pytest.raises(ValueError, match="not a tile action"):
        template_of("tile:4y2rv")


def test_tile_actions_the_target_cannot_hold_are_masked():
    actions = ["tile:14x2rv", "tile:4x2rv", "tile:12x1vr-k64"]
    assert tile_mask(actions, AVX512).tolist() == [True, True, True]
    assert tile_mask(actions, AVX2).tolist() == [False, True, True]


def test_tile_network_rollout_is_one_step_to_its_best_fitting_template():
    actions = ["tile:14x2rv", "tile:4x2rv", "tile:12x1vr-k64"]
    q = network_preferring(actions, ["tile:14x2rv", "tile:12x1vr-k64"])
    on_avx512 = rollout(q, SMALL_BT, target=AVX512)
    assert on_avx512.actions == ["tile:14x2rv"] and len(on_avx512.states) == 2
    assert on_avx512.final.schedule == apply_tile(SMALL_BT, "tile:14x2rv", AVX512)
    assert rollout(q, SMALL_BT, target=AVX2).actions == ["tile:12x1vr-k64"]  # 28 accumulators do not fit


def test_tile_bundles_round_trip_and_unknown_actions_are_refused(tmp_path):
    actions = tile_action_space()
    q = network_preferring(actions, [actions[5]])
    save_bundle(tmp_path, q, {"note": "tile actions"})
    loaded = load_bundle(str(tmp_path / "policy.pt"))
    assert loaded.network.actions == tuple(actions) and loaded.network.tile_actions
    assert rollout(loaded.network, SMALL_BT, target=AVX512).actions == [actions[5]]
    meta = json.loads((tmp_path / "policy.json").read_text())
    (tmp_path / "other.json").write_text(json.dumps({**meta, "actions": ["tile:nonsense", *actions[1:]]}))
    (tmp_path / "other.pt").write_bytes((tmp_path / "policy.pt").read_bytes())
    with pytest.raises(PolicyError, match="not a tile action"):
        load_bundle(str(tmp_path / "other.pt"))


def test_decision_measures_the_tile_networks_pick_first(tmp_path):
    actions = tile_action_space()
    pick = actions[-1]  # not in the cover: only the network brings it in
    save_bundle(tmp_path, network_preferring(actions, [pick]), {})
    measured = []

    def record(spec, schedule):
        measured.append(schedule)
        return 1.0

    evaluator = Evaluator(SMALL_BT, record)
    root = AgentState(Schedule.base(SMALL_BT))
    outcome = policy_tiles(
        evaluator, root, deadline=float("inf"), target=AVX512, policy_path=str(tmp_path / "policy.pt")
    )
    assert measured[0] == apply_tile(SMALL_BT, pick, AVX512)
    assert outcome.actions == (pick,)  # ties keep the first measured


def test_bundled_tile_network_says_how_it_was_trained_and_is_not_the_default_decision():
    from optserve.policies.policy import TILE_POLICY, decision_policy_path, default_policy_path

    assert decision_policy_path() == default_policy_path()  # not shipped as the default (docs/bench)
    bundle = load_bundle(str(default_policy_path().parent / TILE_POLICY))
    assert bundle.network.tile_actions and list(bundle.network.actions) == tile_action_space()
    assert bundle.meta["shapes"] >= 9 * 10 and set(bundle.meta["kinds"]) == set(KINDS)
    assert "tile_q" in bundle.meta["command"] and 0 < bundle.meta["score_k_fold"]["pick"] <= 1
    spec = case_from_name("matmul:m=64,k=48,n=80").spec()
    visited = rollout(bundle.network, spec, target=AVX512)
    assert len(visited.actions) == 1 and visited.actions[0] in tile_action_space()
