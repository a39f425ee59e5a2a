"""Generated kernels compute the contraction exactly as numpy does, for any legal schedule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optserve.kernels.codegen import Target, emitted_statements, plan_schedule
from optserve.kernels.jit import compile_schedule
from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from tests.kernels.kernels_helpers import random_schedule, reference

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
CASES = {
    "matmul": (MATMUL, {"m": 13, "k": 9, "n": 37}),
    "batched matmul": ("C[b,m,n] += A[b,m,k] * B[b,k,n]", {"b": 3, "m": 5, "k": 7, "n": 19}),
    "matvec": ("y[m] += A[m,k] * x[k]", {"m": 11, "k": 45}),
    "transposed B (strided innermost)": ("C[m,n] += A[m,k] * B[n,k]", {"m": 6, "k": 21, "n": 10}),
    "convolution": (
        "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
        {"k": 4, "c": 3, "p": 6, "q": 9, "r": 3, "s": 2},
    ),
    "outer product": ("C[m,n] += a[m] * b[n]", {"m": 7, "n": 24}),
}


def run_and_compare(spec: LoopNestSpec, schedule: Schedule, seed: int = 0) -> None:
    kernel = compile_schedule(spec, schedule)
    rng = np.random.default_rng(seed)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = reference(spec, out, lhs, rhs)
    kernel(out, lhs, rhs)
    kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=schedule.text())


@pytest.mark.parametrize("name", list(CASES))
def test_base_schedule_matches_numpy(name):
    einsum, sizes = CASES[name]
    spec = LoopNestSpec.parse(einsum, sizes)
    run_and_compare(spec, Schedule.base(spec))


@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_schedules_match_numpy(name, data):
    einsum, sizes = CASES[name]
    spec = LoopNestSpec.parse(einsum, sizes)
    run_and_compare(spec, data.draw(random_schedule(spec)))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 70))
def test_random_matmul_shapes_and_schedules_match_numpy(data, m, k, n):
    spec = LoopNestSpec.parse(MATMUL, {"m": m, "k": k, "n": n})
    run_and_compare(spec, data.draw(random_schedule(spec)), seed=m * 10007 + n)


def test_register_tiled_matmul_with_tails_matches_numpy():
    spec = LoopNestSpec.parse(MATMUL, {"m": 30, "k": 17, "n": 50})
    # m: 7 blocks of 4 + tail 2; n: 3 blocks of 16 + tail 2; the tile (4 x 16) sits inside k.
    schedule = Schedule(
        compute=(Loop("n", 3, 2), Loop("m", 7, 2), Loop("k", 17), Loop("m", 4), Loop("n", 16)),
        writeback=Schedule.base(spec).writeback,
    )
    run_and_compare(spec, schedule)


def test_reduction_innermost_uses_vector_partial_sums():
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[n,k]", {"m": 5, "k": 37, "n": 6})
    schedule = Schedule(
        compute=(Loop("m", 5), Loop("n", 6), Loop("k", 37)), writeback=Schedule.base(spec).writeback
    )
    plan, vectorized = plan_schedule(spec, schedule, Target(vector_widths=(8,)))
    assert vectorized
    run_and_compare(spec, schedule)


def matmul_schedule(spec: LoopNestSpec, *loops: Loop) -> Schedule:
    return Schedule(compute=loops, writeback=Schedule.base(spec).writeback)


def test_a_cache_block_tail_reuses_the_block_code():
    # k in blocks of 64 with a tail of 44 (300 = 4 * 64 + 44): the tail is a fifth trip of the block loop
    # whose inner k loop runs 44 trips, so the kernel has no more code than one without a tail.
    def statements(k: int, tail: int) -> int:
        spec = LoopNestSpec.parse(MATMUL, {"m": 8, "k": k, "n": 32})
        schedule = matmul_schedule(spec, Loop("k", 4, tail), Loop("k", 64), Loop("m", 8), Loop("n", 32))
        run_and_compare(spec, schedule)
        return emitted_statements(plan_schedule(spec, schedule, Target(vector_widths=(8,)))[0])

    assert statements(300, 44) == statements(256, 0)


def test_nested_block_tails_run_their_own_trip_counts():
    # n: 50 = 31 + 19; each block in pieces of 12 (31 = 2 * 12 + 7, 19 = 12 + 7): the middle loop runs
    # 3 or 2 trips, and its last trip's inner loop 7 instead of 12, in either block.
    spec = LoopNestSpec.parse(MATMUL, {"m": 19, "k": 35, "n": 50})
    schedule = matmul_schedule(
        spec, Loop("n", 1, 19), Loop("k", 35), Loop("n", 2, 7), Loop("n", 12), Loop("m", 19)
    )
    run_and_compare(spec, schedule)


def test_a_short_window_loop_around_a_channel_loop_is_not_unrolled():
    # A 3x3 window around a runtime channel loop: unrolling it would copy the channel loop nine times.
    einsum = "O[n,f,y,x] += I[n,c,y+r,x+s] * W[f,c,r,s]"
    spec = LoopNestSpec.parse(einsum, {"n": 1, "f": 2, "c": 24, "y": 4, "x": 16, "r": 3, "s": 3})
    schedule = matmul_schedule(
        spec, Loop("n", 1), Loop("r", 3), Loop("s", 3), Loop("c", 24), Loop("f", 2), Loop("y", 4),
        Loop("x", 16),
    )  # fmt: skip
    plan, _ = plan_schedule(spec, schedule, Target(vector_widths=(16,)))
    assert emitted_statements(plan) == 2 * 4  # one register tile: f x y rows of one 16-wide vector
    run_and_compare(spec, schedule)


def test_strided_innermost_is_not_vectorized():
    spec = LoopNestSpec.parse(MATMUL, {"m": 16, "k": 8, "n": 8})
    schedule = Schedule(
        compute=(Loop("k", 8), Loop("n", 8), Loop("m", 16)), writeback=Schedule.base(spec).writeback
    )
    _, vectorized = plan_schedule(spec, schedule, Target())
    assert not vectorized
    run_and_compare(spec, schedule)


def test_kernel_rejects_wrong_arrays():
    spec = LoopNestSpec.parse(MATMUL, {"m": 4, "k": 4, "n": 8})
    kernel = compile_schedule(spec, Schedule.base(spec))
    good = [np.zeros(spec.shape(t), np.float32) for t in spec.tensors]
    with pytest.raises(ValueError, match="float32"):
        kernel(good[0].astype(np.float64), good[1], good[2])
    with pytest.raises(ValueError, match="shape"):
        kernel(good[0], np.zeros((5, 4), np.float32), good[2])
    kernel.close()


def test_ir_is_kept_on_request_and_has_vector_fma():
    spec = LoopNestSpec.parse(MATMUL, {"m": 8, "k": 8, "n": 16})
    kernel = compile_schedule(spec, Schedule.base(spec), keep_ir=True)
    assert "define void @kernel" in kernel.llvm_ir
    assert "llvm.fma.v" in kernel.llvm_ir
    assert kernel.compile_seconds > 0
    kernel.close()


def test_kernel_with_too_much_straight_line_code_is_refused():
    spec = LoopNestSpec.parse(MATMUL, {"m": 8, "k": 8, "n": 8})
    with pytest.raises(SpecError, match="multiply-adds"):
        compile_schedule(spec, Schedule.base(spec), target=Target(max_total_statements=4))
