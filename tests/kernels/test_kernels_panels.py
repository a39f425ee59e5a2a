"""Packing in panels for size (kernels/packing.py, the fourth and fifth cases; kernels/tiling.py
`large_panels`): B in column panels, A[m,k] and B[n,k] in panels copied from rows, each panel a cache line
apart; every kind computes what numpy computes with every combination packed, at sizes that leave tails in
every register tile and panel, on one thread and on blocks of several."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from optserve.kernels.codegen import Target, schedule_panels, workspace_floats
from optserve.kernels.jit import compile_schedule
from optserve.kernels.packing import (
    PANEL_PAD,
    column_packable,
    panel_of,
    panel_packable,
    transposed_panel_packable,
)
from optserve.kernels.parallel import compile_parallel
from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.kernels.tiling import PANEL_FLOATS, TileTemplate, tiled_schedule
from tests.kernels.kernels_helpers import reference

KINDS = {
    "A·B": "C[m,n] += A[m,k] * B[k,n]",
    "A·B^T": "C[m,n] += A[m,k] * B[n,k]",
    "A^T·B": "C[m,n] += A[k,m] * B[k,n]",
    "A^T·B^T": "C[m,n] += A[k,m] * B[n,k]",
    "batched": "C[b,m,n] += A[b,m,k] * B[b,k,n]",
    "conv NHWC": "O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]",
}
ODD = {"m": 37, "k": 29, "n": 45, "b": 2, "y": 5, "x": 7, "r": 3, "s": 2, "c": 19, "f": 21}
TEMPLATES = [TileTemplate(12, 1), TileTemplate(4, 2, k_block=16, v_block=32, r_block=8), TileTemplate(3, 1)]
AVX512 = Target(vector_widths=(16, 8))


def _spec(kind: str, sizes: dict[str, int] = ODD) -> LoopNestSpec:
    einsum = KINDS[kind]
    used = {
        i
        for part in einsum.replace("+=", "*").split("*")
        for i in part.split("[")[1].rstrip("] ").replace("+", ",").split(",")
    }
    return LoopNestSpec.parse(einsum, {i: v for i, v in sizes.items() if i in used})


def _run(spec: LoopNestSpec, schedule: Schedule, threads: int = 1) -> None:
    kernel = compile_parallel(spec, schedule, threads, target=AVX512, min_block_work=1)
    rng = np.random.default_rng(5)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = reference(spec, out, lhs, rhs)
    kernel(out, lhs, rhs)
    kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=schedule.text())


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name())
@pytest.mark.parametrize("threads", [1, 3])
def test_every_kind_matches_numpy_with_every_panel_it_may_pack(kind, template, threads):
    spec = _spec(kind)
    tiled = tiled_schedule(spec, template, 16)
    names = [name for name in panel_packable(spec) if name not in tiled.pack]
    assert names or kind == "conv NHWC" and column_packable(spec) == ("W",) or tiled.pack
    for extra in [(), *((name,) for name in names), tuple(names)]:
        schedule = dataclasses.replace(
            tiled, pack=tuple(n for n in ("A", "B", "I", "W") if n in tiled.pack + extra)
        )
        try:
            schedule.check(spec)
        except SpecError as error:
            assert "whole number" in str(error)  # a panel the nest's loops would split: refused, not wrong
            continue
        _run(spec, schedule, threads)


def test_which_inputs_pack_in_which_panels():
    assert column_packable(_spec("A·B")) == ("B",) and transposed_panel_packable(_spec("A·B")) == ("A",)
    assert transposed_panel_packable(_spec("A·B^T")) == ("A", "B") and column_packable(_spec("A·B^T")) == ()
    assert (
        column_packable(_spec("conv NHWC")) == ("W",) and transposed_panel_packable(_spec("conv NHWC")) == ()
    )
    matvec = LoopNestSpec.parse("y[m] += A[m,k] * x[k]", {"m": 8, "k": 8})
    assert column_packable(matvec) == () and transposed_panel_packable(matvec) == ("A",)


def test_panels_of_4_kib_or_more_start_a_cache_line_apart():
    spec = _spec("A·B", {"m": 64, "k": 256, "n": 64})
    b_panel = panel_of(spec, spec.inputs[1], 16)  # 256 x 16 floats: 16 KiB
    assert b_panel is not None and b_panel.pad == PANEL_PAD
    assert b_panel.offset("n", 32) == 2 * (16 * 256 + PANEL_PAD) and b_panel.offset("n", 5) == 5
    assert b_panel.offset("k", 3) == 3 * 16 and b_panel.size == 4 * (16 * 256 + PANEL_PAD)
    small = panel_of(_spec("A·B", {"m": 8, "k": 8, "n": 16}), spec.inputs[1], 16)
    assert small is not None and small.pad == 0


def test_a_panel_split_by_the_nest_is_refused():
    spec = _spec("A·B")
    nest = (Loop("n", 1), Loop("m", 37), Loop("k", 29), Loop("n", 2, 5), Loop("n", 20))  # 45: not 20s
    split = Schedule(nest, Schedule.base(spec).writeback, ("B",))
    Schedule(nest[1:], split.writeback, ("B",)).check(spec)  # a tail of 5 after two panels: whole ones
    with pytest.raises(SpecError, match="whole number"):
        split.check(spec)


def test_large_matmuls_pack_b_and_under_tall_tiles_a_and_their_blocks_run_on_panels():
    large = _spec("A·B", {"m": 600, "k": 600, "n": 600})
    assert PANEL_FLOATS < 600 * 600
    assert tiled_schedule(large, TileTemplate(4, 4), 16).pack == ("B",)
    assert tiled_schedule(large, TileTemplate(12, 1), 16).pack == ("A", "B")
    assert tiled_schedule(large, TileTemplate(12, 1, pack=False), 16).pack == ()
    small = _spec("A·B", {"m": 256, "k": 256, "n": 256})
    assert tiled_schedule(small, TileTemplate(12, 1), 16).pack == ()  # fits the caches: no copy per call
    # 512^3, the sub-problem larger matmuls are decided on (policies/proxy.py), is timed on their panels
    timed = _spec("A·B", {"m": 512, "k": 512, "n": 512})
    assert tiled_schedule(timed, TileTemplate(12, 1), 16).pack == ("A", "B")
    schedule = tiled_schedule(large, TileTemplate(12, 1, k_block=128, r_block=96), 16)
    panels = schedule_panels(large, schedule)
    assert panels[0] is not None and panels[0].transposed and panels[0].width == 12
    assert panels[1] is not None and not panels[1].transposed and panels[1].width == 16
    assert workspace_floats(large, schedule) == (panels[0].size, panels[1].size)
    kernel = compile_schedule(large, schedule, target=AVX512)
    rng = np.random.default_rng(1)
    out, lhs, rhs = (rng.uniform(-1, 1, large.shape(t)).astype(np.float32) for t in large.tensors)
    expected = out + lhs @ rhs
    kernel(out, lhs, rhs)
    kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
