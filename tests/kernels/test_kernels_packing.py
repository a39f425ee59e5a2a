"""Packing a strided operand (kernels/packing.py): the blocked transpose copies exactly, the backend packs
where the schedule's innermost loop asks for it (and only where the input is reused), and every matmul
layout computes what numpy computes, packed and unpacked, at sizes that leave tails in every tile."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest

from optserve.kernels.codegen import Target, generate_ir, schedule_panels
from optserve.kernels.jit import compile_ir, new_target_machine
from optserve.kernels.packing import (
    pack_function_ir,
    packed_layout,
    packed_reuse,
    panel_function_ir,
    panel_of,
    row_packable,
    transpose_masks,
)
from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.kernels.tiling import TileTemplate, roles, tiled_schedule
from tests.kernels.kernels_helpers import reference

LAYOUTS = {
    "A·B": "C[m,n] += A[m,k] * B[k,n]",
    "A·B^T": "C[m,n] += A[m,k] * B[n,k]",
    "A^T·B": "C[m,n] += A[k,m] * B[k,n]",
    "A^T·B^T": "C[m,n] += A[k,m] * B[n,k]",
    "batched A·B^T": "C[b,m,n] += A[b,m,k] * B[b,n,k]",
    "batched A^T·B": "C[b,m,n] += A[b,k,m] * B[b,k,n]",
}
# odd sizes (no multiple of 8 or 16: a tail in every copy tile and register tile), and one with full tiles
SIZES = [{"m": 37, "k": 29, "n": 53}, {"m": 5, "k": 40, "n": 33}, {"m": 32, "k": 48, "n": 64}]
TEMPLATES = [
    TileTemplate(4, 2),
    TileTemplate(4, 2, pack=False),
    TileTemplate(6, 1, k_block=8, v_block=32, r_block=12, order="vr"),
]
TARGETS = {"avx512": Target(vector_widths=(16, 8)), "avx2": Target(vector_widths=(8,)), "scalar": Target(())}


def run_on(spec: LoopNestSpec, schedule: Schedule, target: Target) -> str:
    """Compile for `target`, run once, compare with a float64 reference; the IR."""
    text = generate_ir(spec, schedule, target)
    kernel = compile_ir(spec, schedule, text)
    rng = np.random.default_rng(3)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = reference(spec, out, lhs, rhs)
    kernel(out, lhs, rhs)
    kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=schedule.text())
    return text


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "x".join(map(str, s.values())))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_matches_numpy_packed_and_unpacked(layout, sizes, target):
    sizes = {"b": 2, **sizes} if layout.startswith("batched") else sizes
    spec = LoopNestSpec.parse(LAYOUTS[layout], sizes)
    widths = TARGETS[target].vector_widths
    for template in TEMPLATES:
        run_on(spec, tiled_schedule(spec, template, widths[0] if widths else 1), TARGETS[target])
    run_on(spec, Schedule.base(spec), TARGETS[target])


def copy_with(shape: tuple[int, ...], order: tuple[int, ...], width: int, source: np.ndarray) -> np.ndarray:
    """Run the generated pack function alone on `source`."""
    text = pack_function_ir("pack", shape, order, width)
    text += "\ndefine void @run(ptr %s, ptr %d) {\nentry:\n  call void @pack(ptr %s, ptr %d)\n  ret void\n}\n"
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), new_target_machine())
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("run"))
    packed = np.full([shape[j] for j in order], np.nan, dtype=np.float32)
    run(source.ctypes.data, packed.ctypes.data)
    engine.close()
    return packed


@pytest.mark.parametrize("width", [1, 4, 8, 16])
@pytest.mark.parametrize(
    "shape, order",
    [
        ((53, 37), (1, 0)),
        ((16, 32), (1, 0)),
        ((3, 21, 19), (0, 2, 1)),
        ((9, 2, 35), (1, 2, 0)),
        ((21, 5, 3, 3), (1, 2, 3, 0)),  # NCHW weights, channels last: one row of c*r*s per channel
        ((2, 19, 3, 2, 5), (0, 2, 3, 4, 1)),
    ],
)
def test_blocked_transpose_copies_every_element_to_its_packed_place(shape, order, width):
    source = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    np.testing.assert_array_equal(copy_with(shape, order, width, source), source.transpose(order))


def test_transpose_masks_move_row_r_to_column_r():
    for width in (2, 4, 8, 16):
        rows = [[(r, c) for c in range(width)] for r in range(width)]
        for h, low, high in transpose_masks(width):
            for i in (i for i in range(width) if i & h == 0):
                a, b = rows[i], rows[i + h]
                rows[i], rows[i + h] = [(a + b)[j] for j in low], [(a + b)[j] for j in high]
        assert rows == [[(r, c) for r in range(width)] for c in range(width)]


def test_the_schedule_chooses_packing_only_where_the_input_is_reused():
    abt = LoopNestSpec.parse(LAYOUTS["A·B^T"], {"m": 64, "k": 64, "n": 64})
    layout = packed_layout(abt, "n")  # innermost n: B is read at a stride along it, and reused across m
    assert layout is not None and layout.orders == (None, (1, 0))
    assert packed_layout(abt, "k") is None  # innermost k: contiguous everywhere, partial sums
    for plain in ("A·B", "A^T·B"):
        spec = LoopNestSpec.parse(LAYOUTS[plain], {"m": 64, "k": 64, "n": 64})
        assert all(packed_layout(spec, inner) is None for inner in (None, "m", "k", "n"))
    matvec = LoopNestSpec.parse("y[m] += A[m,k] * x[k]", {"m": 64, "k": 64})
    assert packed_layout(matvec, "m") is None  # A is read once: packing would only add a copy
    both = LoopNestSpec.parse(LAYOUTS["A^T·B^T"], {"m": 64, "k": 64, "n": 64})
    assert packed_layout(both, "m") is not None  # nothing is contiguous everywhere: always packed
    assert packed_reuse(abt) == 64 and packed_reuse(matvec) is None
    # B must be packed in A^T·B^T; what is chosen is A's packing, read across n
    wide = LoopNestSpec.parse(LAYOUTS["A^T·B^T"], {"m": 64, "k": 64, "n": 48})
    assert packed_reuse(wide) == 48
    assert packed_reuse(LoopNestSpec.parse(LAYOUTS["A^T·B"], {"m": 64, "k": 64, "n": 40})) == 40
    assert packed_reuse(LoopNestSpec.parse(LAYOUTS["A·B"], {"m": 64, "k": 64, "n": 40})) is None


def test_a_packing_template_vectorizes_n_on_a_packed_b_and_its_twin_keeps_partial_sums():
    spec = LoopNestSpec.parse(LAYOUTS["A·B^T"], {"m": 256, "k": 256, "n": 256})
    packed, unpacked = roles(spec), roles(spec, pack=False)
    assert (packed.vector, packed.partial, packed.rows) == ("n", False, ("m",))
    assert (unpacked.vector, unpacked.partial) == ("k", True)
    target = Target(vector_widths=(16, 8))
    text = generate_ir(spec, tiled_schedule(spec, TileTemplate(12, 1), 16), target)
    assert "call void @pack1(ptr %in1, ptr @buffer1)" in text and "shufflevector <8 x float>" in text
    assert "llvm.vector.reduce" not in text  # no partial sums: an ordinary matmul on B_packed[k,n]
    text = generate_ir(spec, tiled_schedule(spec, TileTemplate(12, 1, pack=False), 16), target)
    assert "@pack" not in text and "llvm.vector.reduce.fadd.v16f32" in text


@pytest.mark.parametrize(
    "einsum, packable",
    [
        (LAYOUTS["A^T·B"], ("A",)),
        (LAYOUTS["A^T·B^T"], ("A",)),
        (LAYOUTS["batched A^T·B"], ("A",)),
        (LAYOUTS["A·B"], ()),
        (LAYOUTS["A·B^T"], ()),
        (LAYOUTS["batched A·B^T"], ()),
        ("y[m] += A[k,m] * x[k]", ()),  # A is contiguous along the output's index: nothing to broadcast
        ("y[n] += x[k] * A[k,n]", ()),  # x's last dimension is the reduction already
        ("O[f,y,x] += I[c,y+r,x+s] * W[f,c,r,s]", ()),  # W's last dimension is a reduction
        ("C[m,n] += A[m] * B[n]", ()),  # no reduction to move last
    ],
)
def test_only_an_input_read_with_a_row_index_last_may_be_packed_along_the_reduction(einsum, packable):
    sizes = {"b": 2, "m": 9, "k": 7, "n": 11, "f": 3, "c": 2, "y": 5, "x": 6, "r": 3, "s": 3}
    spec = LoopNestSpec.parse(einsum, {i: sizes[i] for i in sizes if f"{i}," in einsum or f"{i}]" in einsum})
    assert row_packable(spec) == packable


def test_a_packing_template_packs_a_transposed_a_and_its_twin_reads_it_in_place():
    target = Target(vector_widths=(16, 8))
    atb = LoopNestSpec.parse(LAYOUTS["A^T·B"], {"m": 96, "k": 80, "n": 112})
    packed = tiled_schedule(atb, TileTemplate(4, 2), 16)
    in_place = tiled_schedule(atb, TileTemplate(4, 2, pack=False), 16)
    assert packed.pack == ("A",) and in_place.pack == () and packed.compute == in_place.compute
    assert packed.compute_key() != in_place.compute_key()  # measured and cached as two schedules
    layout = packed_layout(atb, "n", packed.pack)
    assert layout is not None and layout.orders == ((1, 0), None)  # A[k,m] copied as A_packed[m,k]
    text = generate_ir(atb, packed, target)
    assert "call void @pack0(ptr %in0, ptr @buffer0)" in text and "@pack1" not in text
    assert "@pack" not in generate_ir(atb, in_place, target)
    both = LoopNestSpec.parse(LAYOUTS["A^T·B^T"], {"m": 96, "k": 80, "n": 112})
    text = generate_ir(both, tiled_schedule(both, TileTemplate(4, 2), 16), target)
    assert "call void @pack0" in text and "call void @pack1" in text  # an ordinary matmul on both copies
    text = generate_ir(both, tiled_schedule(both, TileTemplate(4, 2, pack=False), 16), target)
    assert "call void @pack0" not in text and "call void @pack1" in text  # B must be packed, A need not
    batched = LoopNestSpec.parse(LAYOUTS["batched A^T·B"], {"b": 2, "m": 9, "k": 7, "n": 11})
    layout = packed_layout(batched, None, ("A",))
    assert layout is not None and layout.orders[0] == (0, 2, 1)  # A[b,k,m] -> A_packed[b,m,k]


def test_a_schedule_packs_only_what_may_be_packed_and_round_trips_its_pack_line():
    atb = LoopNestSpec.parse(LAYOUTS["A^T·B"], {"m": 37, "k": 29, "n": 53})
    schedule = tiled_schedule(atb, TileTemplate(4, 2), 16)
    assert schedule.text().splitlines()[-1] == "pack A"
    assert Schedule.from_text(schedule.text()) == schedule
    schedule.check(atb)
    k_innermost = (Loop("m", 37), Loop("n", 53), Loop("k", 29))
    for wrong, message in [
        (Schedule(schedule.compute, schedule.writeback, ("C",)), "cannot pack C"),
        (Schedule(schedule.compute, schedule.writeback, ("A", "A")), "each once"),
        (Schedule(k_innermost, schedule.writeback, ("A",)), "innermost loop over n"),
    ]:
        with pytest.raises(SpecError, match=message):
            wrong.check(atb)
    conv = LoopNestSpec.parse(
        "O[n,f,y,x] += W[f,c,r,s] * I[n,c,y+r,x+s]", {"n": 1, "f": 4, "c": 3, "y": 5, "x": 6, "r": 3, "s": 3}
    )
    with pytest.raises(SpecError, match="cannot pack W"):
        Schedule(Schedule.base(conv).compute, Schedule.base(conv).writeback, ("W",)).check(conv)
    matmul = LoopNestSpec.parse(LAYOUTS["A·B"], {"m": 37, "k": 29, "n": 53})
    assert tiled_schedule(matmul, TileTemplate(4, 2), 16).pack == ()  # nothing to pack: the twin's nest
    with pytest.raises(SpecError, match="bad schedule line"):
        Schedule.from_text("pack A\n" + schedule.text())  # only after the write-back nest


@pytest.mark.parametrize("layout", ["A^T·B", "A^T·B^T", "batched A^T·B"])
def test_every_pool_template_packing_a_in_panels_matches_numpy(layout):
    """The panel copy (A's register-tile rows contiguous per reduction step) under every register tile,
    block and order of the pool, on sizes that leave a partial panel and tails in every loop."""
    from optserve.policies.tiles import template_pool

    sizes = {"m": 37, "k": 29, "n": 45} | ({"b": 2} if layout.startswith("batched") else {})
    spec = LoopNestSpec.parse(LAYOUTS[layout], sizes)
    target = Target(vector_widths=(16, 8), accumulator_registers=28)
    rng = np.random.default_rng(5)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = reference(spec, out.copy(), lhs, rhs)
    widths = set()
    for template in template_pool()[:60]:
        schedule = tiled_schedule(spec, template, 16)
        text = generate_ir(spec, schedule, target)
        panel = schedule_panels(spec, schedule)[0]
        assert panel is not None and f"[{panel.size} x float]" in text  # tiled schedules keep to panels
        widths.add(panel.width)
        kernel = compile_ir(spec, schedule, text)
        result = out.copy()
        kernel(result, lhs, rhs)
        kernel.close()
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4, err_msg=template.name())
    assert len(widths) >= 5  # register tiles of many heights, most leaving a partial last panel


def test_a_row_loop_that_splits_a_panel_falls_back_to_the_transposed_copy():
    spec = LoopNestSpec.parse(LAYOUTS["A^T·B"], {"m": 37, "k": 29, "n": 53})
    # rows in steps of 5 around a register tile of 4: a step of 5 rows crosses panels of 4
    loops = (Loop("m", 7, 2), Loop("k", 29), Loop("m", 1, 1), Loop("m", 4), Loop("n", 53))
    schedule = Schedule(loops, Schedule.base(spec).writeback, ("A",))
    schedule.check(spec)
    assert schedule_panels(spec, schedule) == (None, None)
    k_innermost = Schedule((Loop("m", 37), Loop("n", 53), Loop("k", 29)), schedule.writeback, ("A",))
    assert schedule_panels(spec, k_innermost) == (None, None)  # no broadcast A to pack: none
    run_on(spec, schedule, Target(vector_widths=(16, 8)))  # A copied as A_packed[m,k] instead


@pytest.mark.parametrize("width", [1, 4, 6, 14])
@pytest.mark.parametrize(
    "layout, sizes",
    [("A^T·B", {"m": 37, "k": 29, "n": 5}), ("batched A^T·B", {"b": 3, "m": 13, "k": 40, "n": 3})],
)
def test_panel_copy_puts_each_reduction_steps_tile_rows_side_by_side(layout, sizes, width):
    spec = LoopNestSpec.parse(LAYOUTS[layout], sizes)
    panel = panel_of(spec, spec.inputs[0], width)
    assert panel is not None
    text = panel_function_ir("pack", panel)
    text += "\ndefine void @run(ptr %s, ptr %d) {\nentry:\n  call void @pack(ptr %s, ptr %d)\n  ret void\n}\n"
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), new_target_machine())
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("run"))
    source = np.random.default_rng(0).uniform(-1, 1, spec.shape(spec.inputs[0])).astype(np.float32)
    packed = np.full(panel.size, np.nan, dtype=np.float32)
    run(source.ctypes.data, packed.ctypes.data)
    engine.close()
    batches = source.reshape(panel.batch, panel.depth, panel.rows)
    padded = np.full((panel.batch, panel.depth, panel.padded), np.nan, dtype=np.float32)
    padded[:, :, : panel.rows] = batches  # the padding is never written (nor read by the kernel)
    expected = padded.reshape(panel.batch, panel.depth, -1, width).transpose(0, 2, 1, 3).reshape(-1)
    np.testing.assert_array_equal(packed, expected)
