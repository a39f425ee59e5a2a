"""The LoopTune policy: features as published, greedy rollouts, the bundled network on the test split."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.looptune_training.dataset import train_test_split
from optserve.policies.env import (
    ACTIONS,
    AgentState,
    Evaluator,
    apply_action,
    available_actions,
    observation,
)
from optserve.policies.policy import (
    FEATURE_VERSION,
    PolicyError,
    QNetwork,
    cost_input,
    greedy_action,
    load_bundle,
    network_input,
    rollout,
    save_bundle,
)
from optserve.policies.search import run_search

MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def matmul(m=128, k=64, n=96) -> LoopNestSpec:
    return LoopNestSpec.parse(MATMUL, {"m": m, "k": k, "n": n})


@pytest.fixture(scope="module")
def bundle():
    return load_bundle("models/looptune/policy.pt")


def test_state_of_a_split_schedule_matches_the_published_definition_worked_by_hand():
    # m128 k64 n96 with n split by 16: compute m128, k64, n6, n16; write-back m128, n96; cursor on n6
    spec = matmul()
    state = apply_action(AgentState(Schedule.base(spec), cursor=2), "split_16")
    obs = observation(spec, state)
    assert obs[:6, :4].tolist() == [
        [0, 128, 0, 1],
        [0, 64, 0, 1],
        [1, 6, 0, 1],
        [0, 16, 0, 1],
        [0, 128, 0, 0],
        [0, 96, 0, 0],
    ]
    # n6 steps B and C by 16 elements (ceil(log2 16) = 4), A not at all: 2 of 3 accesses in bin 4
    assert obs[2, 4:].tolist() == pytest.approx([0, 0, 0, 0, 2 / 3] + [0] * 11)
    # n16 steps B and C by 1 element: bin 0
    assert obs[3, 4:].tolist() == pytest.approx([2 / 3] + [0] * 15)
    # k64 steps A by 1 (bin 0) and B by a row of 96 (ceil(log2 96) = 7); C does not move
    assert obs[1, 4:].tolist() == pytest.approx([1 / 3, 0, 0, 0, 0, 0, 0, 1 / 3] + [0] * 8)
    # write-back m reads and writes rows of C (stride 96, bin 7)
    assert obs[4, 4:].tolist() == pytest.approx([0] * 7 + [1.0] + [0] * 8)


def test_tail_is_a_feature_of_the_split_loop():
    spec = matmul(n=100)
    state = apply_action(AgentState(Schedule.base(spec), cursor=2), "split_8")
    obs = observation(spec, state)
    assert obs[2, 1:3].tolist() == [12, 4]  # 12 iterations of 8, then 4 more elements
    assert obs[3, 1:3].tolist() == [8, 0]


def test_network_input_log_scales_sizes_and_tails_and_keeps_the_rest():
    spec = matmul(n=100)
    obs = observation(spec, apply_action(AgentState(Schedule.base(spec), cursor=2), "split_8"))
    x = network_input(obs)
    assert x.shape == (200,) and x.dtype == np.float32
    rows = x.reshape(10, 20)
    assert rows[2, 1] == pytest.approx(math.log2(13) / 8) and rows[2, 2] == pytest.approx(math.log2(5) / 8)
    assert rows[0, 1] == pytest.approx(math.log2(129) / 8)
    np.testing.assert_array_equal(rows[:, [0, 3]], obs[:, [0, 3]])
    np.testing.assert_array_equal(rows[:, 4:], obs[:, 4:])
    assert not rows[6:].any()


def test_cost_input_sees_only_the_compute_nest_and_not_the_cursor():
    spec = matmul()
    base = Schedule.base(spec)
    x = cost_input(spec, base).reshape(10, 20)
    assert x[:3, 3].tolist() == [1, 1, 1] and not x[3:].any() and not x[:, 0].any()
    moved_writeback = apply_action(AgentState(base, cursor=3), "split_16").schedule
    np.testing.assert_array_equal(cost_input(spec, moved_writeback), cost_input(spec, base))


def test_greedy_action_skips_unavailable_actions_and_breaks_ties_by_action_order():
    q = np.array([5.0, 1.0, 3.0, 3.0, 0.0, 0.0, 0.0])
    mask = np.array([False, True, True, True, True, True, True])
    assert greedy_action(q, mask) == 2
    assert greedy_action(q, np.zeros(7, bool)) is None


def test_bundle_is_small_and_describes_itself(bundle):
    from pathlib import Path

    folder = Path("models/looptune")
    assert sum(p.stat().st_size for p in folder.iterdir()) < 2 * 1024 * 1024
    assert bundle.meta["features"] == FEATURE_VERSION and bundle.meta["actions"] == list(ACTIONS)
    assert bundle.cost_model is not None


def test_bundled_policy_gives_legal_schedules_for_every_test_benchmark(bundle):
    _, test = train_test_split()
    assert len(test) == 440
    for bench in test:
        spec = bench.spec()
        visited = rollout(bundle.network, spec)
        assert len(visited.actions) == 10
        for state, action in zip(visited.states, visited.actions, strict=False):
            assert action in available_actions(state)
        final = visited.final.schedule
        final.check(spec, max_loops=10)
        assert final.compute[-1].size == 1 or final.compute[-1].size % 8 == 0


def test_rollout_is_deterministic_across_calls_and_reloads(bundle, tmp_path):
    spec = matmul(176, 96, 112)
    first = rollout(bundle.network, spec).actions
    assert rollout(bundle.network, spec).actions == first
    save_bundle(tmp_path, bundle.network, {"note": "copy"})
    reloaded = load_bundle(str(tmp_path / "policy.pt"))
    assert rollout(reloaded.network, spec).actions == first


def test_policy_search_methods_measure_only_with_polish():
    spec = matmul()
    calls = []

    def fake_measure(s, schedule):
        calls.append(schedule)
        return float(len(schedule.compute))  # more loops = "faster"

    outcome = run_search("policy", Evaluator(spec, fake_measure), 1.0)
    assert outcome.gflops is None and not calls and len(outcome.actions) == 10
    polished = run_search("policy_polish", Evaluator(spec, fake_measure), 1.0)
    assert polished.gflops == max(len(s.compute) for s in calls)
    replayed = AgentState(Schedule.base(spec))
    for action in polished.actions:
        replayed = apply_action(replayed, action)
    assert replayed.schedule == polished.state.schedule


def test_bundle_for_other_features_is_refused(tmp_path):
    network = QNetwork([8])
    save_bundle(tmp_path, network, {})
    meta_path = tmp_path / "policy.json"
    meta_path.write_text(meta_path.read_text().replace(FEATURE_VERSION, "other-features"))
    with pytest.raises(PolicyError, match="features"):
        load_bundle(str(tmp_path / "policy.pt"))
    with pytest.raises(PolicyError, match="no LoopTune model"):
        load_bundle(str(tmp_path / "missing.pt"))
