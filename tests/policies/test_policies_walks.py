"""Any walk of available actions yields a valid schedule whose kernel still computes the matmul."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optserve.kernels.jit import compile_schedule
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.policies.env import MAX_LOOPS, AgentState, apply_action, available_actions, observation

SIZES = st.sampled_from([16, 32, 48, 64, 80])


@settings(max_examples=25, deadline=None)
@given(data=st.data(), m=SIZES, k=SIZES, n=SIZES)
def test_random_action_walks_keep_schedules_valid_and_kernels_correct(data, m, k, n):
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": m, "k": k, "n": n})
    state = AgentState(Schedule.base(spec))
    for _ in range(10):
        action = data.draw(st.sampled_from(available_actions(state)))
        state = apply_action(state, action)
        state.schedule.check(spec, max_loops=MAX_LOOPS)
        assert observation(spec, state)[state.cursor, 0] == 1
        innermost = state.schedule.compute[-1].size
        assert innermost == 1 or innermost % 8 == 0
    kernel = compile_schedule(spec, state.schedule)
    rng = np.random.default_rng(m + k + n)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = out + lhs @ rhs
    kernel(out, lhs, rhs)
    kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=state.schedule.text())
