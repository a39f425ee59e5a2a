"""Packing a strided operand (kernels/packing.py): the blocked transpose copies exactly, the backend packs
where the schedule's innermost loop asks for it (and only where the input is reused), and every matmul
layout computes what numpy computes, packed and unpacked, at sizes that leave tails in every tile."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import numpy as np
import pytest

from optserve.kernels.codegen import Target, generate_ir
from optserve.kernels.jit import compile_ir, new_target_machine
from optserve.kernels.packing import pack_function_ir, packed_layout, packed_reuse, transpose_masks
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, roles, tiled_schedule
from tests.kernels.kernels_helpers import reference

LAYOUTS = {
    "A·B": "C[m,n] += A[m,k] * B[k,n]",
    "A·B^T": "C[m,n] += A[m,k] * B[n,k]",
    "A^T·B": "C[m,n] += A[k,m] * B[k,n]",
    "A^T·B^T": "C[m,n] += A[k,m] * B[n,k]",
    "batched A·B^T": "C[b,m,n] += A[b,m,k] * B[b,n,k]",
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
    [((53, 37), (1, 0)), ((16, 32), (1, 0)), ((3, 21, 19), (0, 2, 1)), ((9, 2, 35), (1, 2, 0))],
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
    assert packed_reuse(abt) == 64 and packed_reuse(both) is None and packed_reuse(matvec) is None


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
