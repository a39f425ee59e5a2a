"""An NHWC convolution's image columns inside the tile loops (kernels/tiling.py `weights_inside`): where
its weights are large, the column loop runs between the tile loops and the window, so one register tile's
panel of the weights serves every column from the caches; the kernels compute what the float64 reference
computes on every tail, on one thread and on cells of threads, and no other kind's nest moves. Its decision
measures the wide register tiles first (`channels_last_first`)."""

from __future__ import annotations

import math

import pytest

from optserve.kernels.codegen import generate_ir
from optserve.kernels.jit import compile_ir
from optserve.kernels.parallel import ParallelKernel, compile_parallel
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import (
    CHANNELS_LAST_TILES,
    INSIDE_FLOATS,
    TileTemplate,
    channels_last_first,
    roles,
    tiled_schedule,
    weights_inside,
)
from tests.kernels.conv_cases import NCHW, NHWC, SIZES, TARGETS, TEMPLATES, check_kernel, sizes_id


def test_large_weights_take_the_image_columns_inside_the_tile_loops():
    conv5 = LoopNestSpec.parse(NHWC, {"n": 1, "f": 512, "c": 512, "y": 7, "x": 7, "r": 3, "s": 3})
    assert weights_inside(conv5, roles(conv5)) == ("x",)
    nest = [lp.index for lp in tiled_schedule(conv5, TileTemplate(8, 2, v_block=256), 16).compute]
    # image columns between the channels' tile loop and the window, the rows (y) in the register tile
    assert nest == ["n", "f", "f", "x", "r", "s", "c", "y", "f"]
    assert [lp.index for lp in tiled_schedule(conv5, TileTemplate(8, 2), 16, inside=False).compute][:2] == [
        "n",
        "x",
    ]
    conv4 = LoopNestSpec.parse(NHWC, {"n": 1, "f": 256, "c": 256, "y": 14, "x": 14, "r": 3, "s": 3})
    assert weights_inside(conv4, roles(conv4)) == ("x",)
    # 1024 x 256 weights (2^18 floats): as fast or faster with the columns outside on the lent Xeon
    reduce = LoopNestSpec.parse(NHWC, {"n": 1, "f": 256, "c": 1024, "y": 14, "x": 14, "r": 1, "s": 1})
    small = LoopNestSpec.parse(NHWC, {"n": 1, "f": 64, "c": 64, "y": 56, "x": 56, "r": 3, "s": 3})
    for spec in (reduce, small):
        assert math.prod(spec.shape(spec.inputs[1])) < INSIDE_FLOATS
        assert weights_inside(spec, roles(spec)) == ()


def test_an_nhwc_decision_measures_the_wide_tiles_first():
    cover = [TileTemplate(2, 3, k_block=128, r_block=128), *CHANNELS_LAST_TILES[1:], TileTemplate(12, 1)]
    nhwc = LoopNestSpec.parse(NHWC, SIZES[0])
    assert channels_last_first(nhwc, cover) == [*CHANNELS_LAST_TILES, cover[0], cover[-1]]
    for text, sizes in ((NCHW, SIZES[0]), ("C[m,n] += A[m,k] * B[k,n]", {"m": 64, "k": 64, "n": 64})):
        assert channels_last_first(LoopNestSpec.parse(text, sizes), cover) == cover


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        (NCHW, {"n": 1, "f": 512, "c": 512, "y": 7, "x": 7, "r": 3, "s": 3}),
        ("C[m,n] += A[m,k] * B[k,n]", {"m": 512, "k": 1024, "n": 512}),
        ("C[b,m,n] += A[b,m,k] * B[b,k,n]", {"b": 8, "m": 64, "k": 512, "n": 512}),
        ("C[m,n] += A[m,k] * B[n,k]", {"m": 512, "k": 1024, "n": 512}),
    ],
)
def test_no_other_kind_moves_a_loop(text, sizes):
    spec = LoopNestSpec.parse(text, sizes)
    for pack in (True, False):
        template = TileTemplate(8, 2, pack=pack)
        assert weights_inside(spec, roles(spec, pack)) == ()
        assert tiled_schedule(spec, template, 16) == tiled_schedule(spec, template, 16, inside=False)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name())
@pytest.mark.parametrize("sizes", SIZES, ids=sizes_id)
def test_columns_inside_match_the_reference_on_every_tail(sizes, template, target):
    spec = LoopNestSpec.parse(NHWC, sizes)
    width = TARGETS[target].vector_widths[0]
    schedule = tiled_schedule(spec, template, width, inside=True)
    schedule.check(spec)
    assert schedule != tiled_schedule(spec, template, width, inside=False)
    check_kernel(spec, compile_ir(spec, schedule, generate_ir(spec, schedule, TARGETS[target])))


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("sizes", SIZES, ids=sizes_id)
def test_columns_inside_on_threads_match_the_reference(sizes, threads):
    spec = LoopNestSpec.parse(NHWC, sizes)
    for template in (TileTemplate(6, 1), TileTemplate(4, 1, order="vr")):
        schedule = tiled_schedule(spec, template, 16, inside=True)
        kernel = compile_parallel(spec, schedule, threads, min_block_work=1)
        assert isinstance(kernel, ParallelKernel)
        check_kernel(spec, kernel, seed=threads)
