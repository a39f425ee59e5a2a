"""An NCHW convolution vectorized along its output channels (kernels/packing.py `channel_vector`): the
weights packed with the channels last, the image broadcast, the output's register tile gathered and
scattered a channel plane apart; it computes what the float64 reference computes on every tail, on one
thread and on cells of threads, and only convolutions whose image row is summed (`x+s`) are vectorized so."""

from __future__ import annotations

import pytest

from optserve.kernels.codegen import Target, generate_ir, plan_schedule, schedule_panels, workspace_floats
from optserve.kernels.jit import compile_ir
from optserve.kernels.packing import channel_panel, channel_vector, packed_layout
from optserve.kernels.parallel import ParallelKernel, compile_parallel
from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, roles, tiled_schedule
from tests.kernels.conv_cases import NCHW, TARGETS, TEMPLATES, check_kernel, sizes_id
from tests.kernels.conv_cases import SIZES as CONV_SIZES

# and a 2x3 window over rows of 3
SIZES = [*CONV_SIZES, {"n": 1, "f": 16, "c": 3, "y": 2, "x": 3, "r": 2, "s": 3}]


def test_only_a_convolution_whose_image_row_is_summed_vectorizes_its_channels():
    sizes = {"n": 1, "f": 8, "c": 4, "y": 5, "x": 6, "r": 3, "s": 3}
    assert channel_vector(LoopNestSpec.parse(NCHW, sizes)) == "f"
    nhwc = LoopNestSpec.parse("O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]", sizes)
    assert channel_vector(nhwc) is None  # its channels are contiguous already
    matmul = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 8, "k": 8, "n": 8})
    assert channel_vector(matmul) is None
    one_channel = LoopNestSpec.parse(NCHW, {**sizes, "f": 1})
    assert channel_vector(one_channel) is None


def test_the_packing_template_vectorizes_channels_and_its_twin_the_image_row():
    spec = LoopNestSpec.parse(NCHW, SIZES[0])
    packed = roles(spec)
    assert (packed.vector, packed.rows, packed.reduction) == ("f", ("x",), "c")
    assert roles(spec, pack=False).vector == "x"
    layout = packed_layout(spec, "f")
    assert layout is not None and layout.orders == (None, (1, 2, 3, 0))  # W[f,c,r,s] -> [c,r,s,f]
    schedule = tiled_schedule(spec, TileTemplate(6, 4), 16)
    assert schedule.compute[-1].index == "f" and not schedule.pack  # the innermost loop says so
    _, vectorized = plan_schedule(spec, schedule, Target(vector_widths=(16, 8)))
    assert vectorized
    text = generate_ir(spec, schedule, Target(vector_widths=(16, 8)))
    assert "@llvm.masked.gather.v16f32" in text and "@llvm.masked.scatter.v16f32" in text


def test_a_strided_output_is_not_vectorized_for_any_other_innermost_index():
    # A^T.B with m innermost: the inputs are contiguous or constant along m, the output is not, and m is
    # no convolution's channel: scalar code as before
    spec = LoopNestSpec.parse("C[m,n] += A[k,m] * B[k,n]", {"m": 16, "k": 8, "n": 8})
    schedule = Schedule((Loop("k", 8), Loop("n", 8), Loop("m", 16)), Schedule.base(spec).writeback)
    assert not plan_schedule(spec, schedule, Target())[1]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name())
@pytest.mark.parametrize("sizes", SIZES, ids=sizes_id)
def test_channel_vectorized_convolutions_match_the_reference_on_every_tail(sizes, template, target):
    spec = LoopNestSpec.parse(NCHW, sizes)
    schedule = tiled_schedule(spec, template, TARGETS[target].vector_widths[0])
    schedule.check(spec)
    assert schedule.compute[-1].index == "f"
    check_kernel(spec, compile_ir(spec, schedule, generate_ir(spec, schedule, TARGETS[target])))


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("sizes", SIZES[:3], ids=sizes_id)
def test_channel_vectorized_convolutions_on_threads_match_the_reference(sizes, threads):
    # cells along the channels pack their own part of W, cells along the rows share one
    spec = LoopNestSpec.parse(NCHW, sizes)
    for template in (TileTemplate(6, 1), TileTemplate(4, 1, order="vr")):
        schedule = tiled_schedule(spec, template, 16)
        kernel = compile_parallel(spec, schedule, threads, min_block_work=1)
        assert isinstance(kernel, ParallelKernel)
        check_kernel(spec, kernel, seed=threads)


def test_the_channel_loop_runs_around_the_window_where_it_strides_a_plane():
    # c strides a plane of the image (and c*r*s floats of W) where r and s stride a row and a float: inside
    # the register tile the loops run c, r, s, so the innermost ones walk neighbouring floats
    spec = LoopNestSpec.parse(NCHW, {"n": 1, "f": 32, "c": 16, "y": 14, "x": 14, "r": 3, "s": 3})
    for pack in (True, False):
        assert roles(spec, pack).reduction_outside
        nest = [lp.index for lp in tiled_schedule(spec, TileTemplate(4, 2, pack=pack), 16).compute]
        assert nest[-5:-2] == ["c", "r", "s"]
    nhwc = LoopNestSpec.parse("O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]", spec.size_of)
    assert not roles(nhwc).reduction_outside  # c is contiguous there: innermost
    assert [lp.index for lp in tiled_schedule(nhwc, TileTemplate(4, 2), 16).compute][-3] == "c"


def test_the_weights_are_packed_in_panels_of_the_register_tiles_channels():
    # W[f,c,r,s] copied as panels of nr channels (16 x 2: 32), c*r*s steps of 32 floats side by side, the
    # last panel (45 = 32 + 13) padded; the tile streams one panel (BLIS's packed B)
    spec = LoopNestSpec.parse(NCHW, SIZES[0])
    schedule = tiled_schedule(spec, TileTemplate(4, 2), 16)
    panels = schedule_panels(spec, schedule)
    assert panels[0] is None and panels[1] == channel_panel(spec, 32)
    panel = panels[1]
    assert (panel.row, panel.width, panel.rows, panel.depth) == ("f", 32, 45, 5 * 3 * 3)
    assert (panel.strides["c"], panel.strides["r"], panel.strides["s"]) == (9 * 32, 3 * 32, 32)
    assert workspace_floats(spec, schedule) == (0, panel.size) and panel.size >= 64 * 45
    unpacked = tiled_schedule(spec, TileTemplate(4, 2, pack=False), 16)  # the image row: no panels
    assert schedule_panels(spec, unpacked) == (None, None)


def test_a_gathered_tile_sums_at_least_gathered_steps_before_it_closes():
    # a 1x1 window: a block of 4 channels would open (gather) and close (scatter) the tile every 4 FMAs;
    # the block grows to GATHERED_STEPS channels, or to ceil(64 / 9) under a 3x3 window
    from optserve.kernels.tiling import GATHERED_STEPS

    for window, block in ((1, GATHERED_STEPS), (3, -(-GATHERED_STEPS // 9))):
        sizes = {"n": 1, "f": 32, "c": 128, "y": 4, "x": 14, "r": window, "s": window}
        spec = LoopNestSpec.parse(NCHW, sizes)
        schedule = tiled_schedule(spec, TileTemplate(4, 1, k_block=4), 16)
        assert [lp.size for lp in schedule.compute if lp.index == "c"] == [128 // block, block]
        row = tiled_schedule(spec, TileTemplate(4, 1, k_block=4, pack=False), 16)  # no gathers: as asked
        assert [lp.size for lp in row.compute if lp.index == "c"] == [32, 4]


def test_the_image_row_layout_takes_the_rows_that_leave_least_to_read_again():
    # rows over the image row y would leave the channel loop outside the tile, reading the whole image
    # once per channel; rows over f read the weights once per image row (what the sub-problem timed too)
    sizes = {"n": 1, "f": 64, "c": 64, "y": 224, "x": 224, "r": 3, "s": 3}
    assert roles(LoopNestSpec.parse(NCHW, sizes), pack=False).rows == ("f",)
    assert roles(LoopNestSpec.parse(NCHW, {**sizes, "y": 64, "x": 64}), pack=False).rows == ("f",)
