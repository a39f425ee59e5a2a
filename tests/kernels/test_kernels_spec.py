"""Contraction specs and schedules are validated before any code is generated."""

from __future__ import annotations

import pytest

from optserve.config import LoopTuneSettings
from optserve.kernels.jit import compile_schedule
from optserve.kernels.measure import measure, peak_gflops
from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError, parse_sizes

MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def test_matmul_spec_shapes_strides_and_flops():
    spec = LoopNestSpec.parse(MATMUL, parse_sizes("m=128,n=96,k=64"))
    assert spec.indices == ("m", "k", "n") and spec.output_indices == ("m", "n")
    assert spec.shape(spec.inputs[1]) == (64, 96)
    assert spec.strides(spec.inputs[1]) == {"m": 0, "k": 96, "n": 1}
    assert spec.flops == 2 * 128 * 96 * 64
    assert spec.text() == MATMUL


def test_convolution_dimension_is_a_sum_of_indices():
    spec = LoopNestSpec.parse("O[k,p] += I[c,p+r] * W[k,c,r]", {"k": 2, "c": 3, "p": 10, "r": 3})
    assert spec.shape(spec.inputs[0]) == (3, 12)
    assert spec.strides(spec.inputs[0])["p"] == spec.strides(spec.inputs[0])["r"] == 1


@pytest.mark.parametrize(
    ("einsum", "sizes", "message"),
    [
        ("C[m,n] = A[m,k] * B[k,n]", {"m": 2, "n": 2, "k": 2}, "expected"),
        ("C[m,n] += A[m,k]", {"m": 2, "n": 2, "k": 2}, "exactly two"),
        ("C[m,n] += A[m,k] * C[k,n]", {"m": 2, "n": 2, "k": 2}, "distinct"),
        ("C[m,z] += A[m,k] * B[k,n]", {"m": 2, "n": 2, "k": 2}, "appear in no input"),
        (MATMUL, {"m": 2, "n": 2}, "no size"),
        (MATMUL, {"m": 2, "n": 2, "k": 2, "q": 3}, "unknown indices"),
        (MATMUL, {"m": 0, "n": 2, "k": 2}, "allowed 1.."),
        ("C[b,m,n] += A[b,m,k] * B[b,k,n]", {"b": 4, "m": 4096, "n": 8, "k": 4096}, "A needs .* bytes"),
        ("C[m,n] += A[m,m] * B[m,n]", {"m": 2, "n": 2}, "twice"),
        ("C[m,n] += A[m,k-1] * B[k,n]", {"m": 2, "n": 2, "k": 2}, "bad index"),
    ],
)
def test_bad_specs_are_rejected_with_a_reason(einsum, sizes, message):
    with pytest.raises(SpecError, match=message):
        LoopNestSpec.parse(einsum, sizes)


def test_limits_come_from_looptune_settings():
    with pytest.raises(SpecError, match="bytes"):
        LoopNestSpec.parse(MATMUL, {"m": 64, "n": 64, "k": 64}, LoopTuneSettings(max_tensor_bytes=1000))


def test_bad_sizes_text_is_rejected():
    with pytest.raises(SpecError, match="NAME=SIZE"):
        parse_sizes("m128")
    with pytest.raises(SpecError, match="not an integer"):
        parse_sizes("m=1.5")


def test_schedule_text_round_trips_and_is_checked():
    spec = LoopNestSpec.parse(MATMUL, {"m": 30, "k": 8, "n": 16})
    schedule = Schedule(
        compute=(Loop("m", 7, 2), Loop("k", 8), Loop("m", 4), Loop("n", 16)),
        writeback=Schedule.base(spec).writeback,
    )
    assert "for m in 7 r 2" in schedule.text().splitlines()[0]
    assert Schedule.from_text(schedule.text()) == schedule
    schedule.check(spec)
    wrong = Schedule(
        compute=(Loop("m", 7), Loop("k", 8), Loop("m", 4), Loop("n", 16)), writeback=schedule.writeback
    )
    with pytest.raises(SpecError, match="covers 28 elements of m"):
        wrong.check(spec)
    with pytest.raises(SpecError, match="tail"):
        Schedule(compute=(Loop("m", 30), Loop("k", 8, 1), Loop("n", 16)), writeback=schedule.writeback).check(
            spec
        )
    with pytest.raises(SpecError, match="bad schedule line"):
        Schedule.from_text("for m 30")


def test_measure_reports_positive_gflops_below_a_sane_multiple_of_peak():
    spec = LoopNestSpec.parse(MATMUL, {"m": 32, "k": 32, "n": 32})
    kernel = compile_schedule(spec, Schedule.base(spec))
    timing = measure(kernel, runs=3, warmup_calls=2)
    kernel.close()
    # the peak read again right after the kernel's timing, the best of that and the process's first reading:
    # on a loaded host either reading alone may have been taken in a slower moment than the kernel's
    peak = max(peak_gflops(), peak_gflops.__wrapped__(runs=5))
    assert timing.gflops > 0 and timing.seconds > 0 and timing.repeats >= 1
    assert 0 < timing.gflops < 2 * peak  # a kernel cannot beat the FMA-only peak by far


class CountingKernel:
    """A kernel stand-in whose every call "takes" 10 ms: the protocol, not the clock, is under test."""

    def __init__(self, spec):
        self.spec, self.calls = spec, 0

    def run_repeated(self, out, lhs, rhs, repeats):
        self.calls += repeats
        return 0.01 * repeats


def test_measure_cut_short_by_a_deadline_times_one_call_only():
    import time

    kernel = CountingKernel(LoopNestSpec.parse(MATMUL, {"m": 16, "k": 16, "n": 16}))
    timing = measure(kernel, runs=3, warmup_calls=2, deadline=time.perf_counter() + 0.005)
    assert kernel.calls == 1 and timing.repeats == 0 and timing.seconds == 0.01
    roomy = CountingKernel(kernel.spec)
    timing = measure(roomy, runs=3, warmup_calls=2, deadline=time.perf_counter() + 60)
    assert roomy.calls == 2 + 3 and timing.repeats == 1  # the full protocol: warm-up 2, best of 3
