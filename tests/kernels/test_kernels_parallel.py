"""Parallel kernels: blocks of an output index on threads give numpy's answer for every kind and tail."""

from __future__ import annotations

import numpy as np
import pytest

from optserve.kernels.jit import host_target
from optserve.kernels.parallel import ParallelKernel, compile_parallel, plan_blocks, restrict
from optserve.kernels.reference import numpy_program
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, tiled_schedule
from optserve.looptune_training.suites import KINDS

# sizes with tails everywhere (no multiple of a vector, of a register tile or of a thread count)
SIZES = {
    "matmul": {"m": 37, "k": 29, "n": 53},
    "matmul_at": {"m": 45, "k": 19, "n": 70},
    "matmul_bt": {"m": 51, "k": 35, "n": 43},
    "batched": {"b": 3, "m": 21, "k": 17, "n": 39},
    "matvec": {"m": 77, "k": 41},
    "vecmat": {"n": 83, "k": 23},
    "conv_nchw": {"n": 2, "f": 11, "c": 5, "y": 13, "x": 17, "r": 3, "s": 3},
    "conv_nhwc": {"n": 1, "y": 15, "x": 9, "c": 6, "f": 21, "r": 3, "s": 2},
    "matmul_tt": {"m": 33, "k": 27, "n": 49},
}
TEMPLATES = [TileTemplate(4, 2, k_block=16, r_block=16), TileTemplate(6, 1, v_block=1, order="vr")]


def _operands(spec: LoopNestSpec, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors]


def _schedules(spec: LoopNestSpec) -> list[Schedule]:
    width = host_target().vector_widths[0]
    out = [Schedule.base(spec)]
    for template in TEMPLATES:
        for pack in (True, False):
            template = TileTemplate(**{**template.__dict__, "pack": pack})
            out.append(tiled_schedule(spec, template, width))
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("threads", [2, 3, 5])
def test_every_kind_on_threads_matches_numpy(kind, threads):
    spec = LoopNestSpec.parse(KINDS[kind], SIZES[kind])
    out, lhs, rhs = _operands(spec)
    _, program = numpy_program(spec)
    expected = out + program(lhs, rhs)
    for schedule in _schedules(spec):
        kernel = compile_parallel(spec, schedule, threads, min_block_flops=1)
        try:
            assert isinstance(kernel, ParallelKernel), schedule.text()
            assert 2 <= kernel.threads <= threads
            got = out.copy()
            kernel(got, lhs, rhs)
            np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4, err_msg=schedule.text())
            kernel.run_repeated(got, lhs, rhs, 3)  # repeated calls accumulate, and do not crash
        finally:
            kernel.close()


def test_blocks_cover_the_index_once_in_whole_register_tiles():
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 1000, "k": 64, "n": 64})
    schedule = tiled_schedule(spec, TileTemplate(6, 4), 16)
    index, blocks = plan_blocks(spec, schedule, 4, min_block_flops=1)
    assert index == "m"
    assert [b.start for b in blocks] == [0, 252, 504, 756] and blocks[-1].size == 244
    block_spec = spec.block("m", 252)
    restricted = restrict(schedule, block_spec, "m", 252)
    restricted.check(block_spec)
    assert [lp for lp in restricted.compute if lp.index != "m"] == [
        lp for lp in schedule.compute if lp.index != "m"
    ]


def test_small_contractions_run_on_one_thread():
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 16, "k": 16, "n": 16})
    kernel = compile_parallel(spec, Schedule.base(spec), 8)
    assert not isinstance(kernel, ParallelKernel)
    kernel.close()


def test_a_block_reads_the_whole_tensors_strides():
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 8, "k": 4, "n": 32})
    block = spec.block("n", 16)
    assert block.shape(block.output) == (8, 16) and block.layout_shape(block.output) == (8, 32)
    assert block.strides(block.output)["m"] == 32 and block.flops == spec.flops // 2
