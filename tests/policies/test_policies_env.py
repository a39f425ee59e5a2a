"""The LoopTune environment follows the published action, state and reward semantics."""

from __future__ import annotations

import numpy as np
import pytest

from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.policies.env import (
    ACTIONS,
    AgentState,
    Evaluator,
    LoopTuneEnv,
    apply_action,
    available_actions,
    observation,
)

MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def matmul(m=128, k=64, n=96) -> LoopNestSpec:
    return LoopNestSpec.parse(MATMUL, {"m": m, "k": k, "n": n})


def base_state(spec: LoopNestSpec) -> AgentState:
    return AgentState(Schedule.base(spec))


def test_base_schedule_is_m_k_n_then_write_back():
    state = base_state(matmul())
    assert [lp.index for lp in state.schedule.compute] == ["m", "k", "n"]
    assert [lp.index for lp in state.schedule.writeback] == ["m", "n"]
    assert state.cursor == 0


def test_split_makes_outer_loop_with_tail_and_inner_loop():
    state = AgentState(Schedule.base(matmul(n=100)), cursor=2)
    after = apply_action(state, "split_8")
    assert after.schedule.compute[2:] == (Loop("n", 12, 4), Loop("n", 8, 0))
    assert after.cursor == 2
    again = apply_action(after, "split_4")  # 12 iterations of 8 + 4: 100 elements in blocks of 32
    assert again.schedule.compute[2:] == (Loop("n", 3, 4), Loop("n", 4, 0), Loop("n", 8, 0))
    again.schedule.check(matmul(n=100))


def test_split_smaller_than_factor_is_illegal():
    state = AgentState(Schedule.base(matmul(k=8)), cursor=1)
    assert apply_action(state, "split_16") is None
    assert "split_16" not in available_actions(state)
    assert "split_8" in available_actions(state)


def test_actions_that_break_vectorizable_innermost_loop_are_unavailable():
    state = AgentState(Schedule.base(matmul()), cursor=2)  # cursor on n (96)
    assert apply_action(state, "split_4") is not None  # legal ...
    assert "split_4" not in available_actions(state)  # ... but leaves an innermost loop of 4
    assert "split_16" in available_actions(state)


def test_cursor_moves_and_swaps_stay_inside_their_nest():
    state = base_state(matmul())
    assert available_actions(state) == ["down", "swap_down", "split_4", "split_8", "split_16"]
    down = apply_action(state, "swap_down")
    assert [lp.index for lp in down.schedule.compute] == ["k", "m", "n"] and down.cursor == 1
    last_compute = AgentState(state.schedule, cursor=2)
    assert apply_action(last_compute, "swap_down") is None  # the write-back nest is another nest
    assert apply_action(last_compute, "down").cursor == 3  # ... but the cursor walks into it
    first_writeback = AgentState(state.schedule, cursor=3)
    assert apply_action(first_writeback, "swap_up") is None
    assert apply_action(first_writeback, "up").cursor == 2


def test_swapping_loops_of_the_same_index_only_moves_the_cursor():
    spec = matmul()
    state = AgentState(Schedule.base(spec), cursor=0)
    split = apply_action(state, "split_16")  # m 8, m 16
    swapped = apply_action(split, "swap_down")
    assert swapped.schedule == split.schedule and swapped.cursor == 1


def test_at_most_ten_loops():
    spec = LoopNestSpec.parse(MATMUL, {"m": 4096, "k": 64, "n": 96})
    state = AgentState(Schedule.base(spec), 0)
    for _ in range(5):  # 5 + 5 base loops = 10
        state = apply_action(state, "split_4")
    assert len(state.schedule.loops) == 10
    assert not any(a.startswith("split") for a in available_actions(state))


def test_observation_layout_and_stride_histogram():
    spec = matmul()
    obs = observation(spec, base_state(spec))
    assert obs.shape == (10, 20) and obs.dtype == np.float32
    assert obs[:, 0].tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]  # cursor
    assert obs[:5, 1].tolist() == [128, 64, 96, 128, 96]  # sizes
    assert obs[:5, 3].tolist() == [1, 1, 1, 0, 0]  # compute vs write-back
    assert not obs[5:].any()  # zero padding
    m_hist = obs[0, 4:]  # A steps by k=64 (bin 6), B not at all, C by n=96 (bin 7): each 1/3
    assert (
        m_hist[6] == pytest.approx(1 / 3)
        and m_hist[7] == pytest.approx(1 / 3)
        and m_hist.sum() == pytest.approx(2 / 3)
    )
    n_hist = obs[2, 4:]  # B and C are contiguous in n, A does not move
    assert n_hist[0] == pytest.approx(2 / 3) and n_hist.sum() == pytest.approx(2 / 3)


def fake_measure(spec, schedule):
    """Stand-in GFLOPS for unit tests (the real backend: tests/kernels and test_policies_search)."""
    return 10.0 + 5.0 * (schedule.compute[-1].size == 16)


def test_env_reward_is_gflops_change_over_peak_and_episode_is_ten_steps():
    spec = matmul()
    env = LoopTuneEnv(Evaluator(spec, fake_measure), peak_gflops=50.0)
    _, reward, done, info = env.step("down")
    assert reward == 0 and not done and info["applied"]
    env.step("down")
    obs, reward, done, info = env.step("split_16")
    assert reward == pytest.approx(5.0 / 50.0) and info["gflops"] == 15.0
    assert obs[2, 0] == 1  # cursor stays on the split (outer) loop
    env.step("down")
    _, reward, _, info = env.step("split_4")  # would leave an innermost 4: unavailable, a no-op
    assert reward == 0 and not info["applied"]
    for _ in range(5):
        _, _, done, _ = env.step("up")
    assert done and env.steps == 10


def test_evaluator_measures_each_compute_nest_once():
    calls = []
    spec = matmul()
    evaluator = Evaluator(spec, lambda s, sch: calls.append(sch) or 1.0)
    base = Schedule.base(spec)
    evaluator.gflops(base)
    evaluator.gflops(AgentState(base, 3).schedule)
    moved = apply_action(AgentState(base, 3), "split_16")  # a write-back split: same generated code
    evaluator.gflops(moved.schedule)
    assert len(calls) == 1 and evaluator.evaluations == 1


def test_unknown_action_is_an_error():
    with pytest.raises(ValueError, match="unknown action"):
        apply_action(base_state(matmul()), "merge")
    assert len(ACTIONS) == 7


def test_evaluator_scores_a_refused_schedule_zero():
    def refuse(spec, schedule):
        raise SpecError("too large")

    evaluator = Evaluator(matmul(), refuse)
    assert evaluator.gflops(Schedule.base(matmul())) == 0.0
