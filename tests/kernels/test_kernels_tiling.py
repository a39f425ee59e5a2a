"""Tiled schedules (register tile, cache blocks, unroll-and-jam) compute every contraction kind exactly,
tails included, and numpy's reference program computes the same contraction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optserve.kernels.codegen import Target, generate_ir
from optserve.kernels.packing import packed_layout
from optserve.kernels.reference import numpy_gflops_of, numpy_program
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, roles, tiled_schedule
from tests.kernels.kernels_helpers import reference
from tests.kernels.test_kernels_codegen import run_and_compare

# Every kind of issue 19 with sizes that leave tails at every level (none a multiple of the tiles).
KINDS = {
    "matmul": ("C[m,n] += A[m,k] * B[k,n]", {"m": 30, "k": 17, "n": 50}),
    "transposed A": ("C[m,n] += A[k,m] * B[k,n]", {"m": 33, "k": 20, "n": 70}),
    "transposed B": ("C[m,n] += A[m,k] * B[n,k]", {"m": 13, "k": 70, "n": 9}),
    "both transposed": ("C[m,n] += A[k,m] * B[n,k]", {"m": 11, "k": 6, "n": 9}),
    "batched": ("C[b,m,n] += A[b,m,k] * B[b,k,n]", {"b": 3, "m": 10, "k": 9, "n": 37}),
    "matvec": ("y[m] += A[m,k] * x[k]", {"m": 19, "k": 77}),
    "vecmat": ("y[n] += x[k] * A[k,n]", {"n": 90, "k": 23}),
    "conv NCHW": (
        "O[n,f,y,x] += I[n,c,y+r,x+s] * W[f,c,r,s]",
        {"n": 2, "f": 5, "y": 6, "x": 21, "c": 3, "r": 3, "s": 3},
    ),
    "conv NHWC": (
        "O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]",
        {"n": 1, "f": 20, "y": 5, "x": 7, "c": 6, "r": 3, "s": 3},
    ),
    "elementwise": ("C[m] += A[m] * B[m]", {"m": 45}),
    # no index contiguous in every tensor: the backend packs an input (kernels/packing.py)
    "output transposed": ("C[n,m] += A[m,k] * B[k,n]", {"m": 21, "k": 11, "n": 9}),
    "batched, both transposed": ("C[b,m,n] += A[b,k,m] * B[b,n,k]", {"b": 2, "m": 7, "k": 13, "n": 19}),
    "conv, weights packed": ("O[x,f] += I[x+s,c] * W[f,c,s]", {"x": 12, "f": 20, "c": 3, "s": 3}),
}
TEMPLATES = [
    TileTemplate(4, 2),
    TileTemplate(6, 1, k_block=8, v_block=32, r_block=12, order="vr"),
    TileTemplate(3, 3, k_block=5, order="rv"),
    TileTemplate(14, 2, k_block=256, v_block=1, r_block=64),
    TileTemplate(1, 1),
    TileTemplate(4, 2, pack=False),  # the unpacked layout (partial sums where packing was optional)
    TileTemplate(3, 3, k_block=5, order="vr", pack=False),
]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name())
@pytest.mark.parametrize("kind", list(KINDS))
def test_tiled_schedules_match_numpy_for_every_kind_with_tails(kind, template):
    einsum, sizes = KINDS[kind]
    spec = LoopNestSpec.parse(einsum, sizes)
    for width in (8, 16):
        schedule = tiled_schedule(spec, template, width)
        schedule.check(spec)
        run_and_compare(spec, schedule)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 70),
    k=st.integers(1, 70),
    n=st.integers(1, 70),
    rows=st.sampled_from([1, 2, 3, 4, 6, 8, 12]),
    vectors=st.integers(1, 4),
    k_block=st.sampled_from([None, 4, 16, 64]),
    v_block=st.sampled_from([None, 1, 32]),
    order=st.sampled_from(["rv", "vr"]),
)
def test_any_template_on_any_matmul_shape_matches_numpy(m, k, n, rows, vectors, k_block, v_block, order):
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": m, "k": k, "n": n})
    run_and_compare(spec, tiled_schedule(spec, TileTemplate(rows, vectors, k_block, v_block, 16, order), 8))


def test_roles_follow_the_strides():
    matmul = roles(LoopNestSpec.parse(*KINDS["matmul"]))
    assert (matmul.vector, matmul.partial, matmul.rows, matmul.reduction) == ("n", False, ("m",), "k")
    matvec = roles(LoopNestSpec.parse(*KINDS["matvec"]))
    assert (matvec.vector, matvec.partial, matvec.rows) == ("k", True, ("m",))
    conv = roles(LoopNestSpec.parse(*KINDS["conv NHWC"]))
    assert (conv.vector, conv.rows, conv.reduction, conv.reductions) == ("f", ("x",), "c", ("r", "s"))
    assert set(conv.outer) == {"n", "y"}


def test_matmul_template_builds_the_blocked_nest():
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 512, "k": 512, "n": 512})
    schedule = tiled_schedule(spec, TileTemplate(8, 2, k_block=128, v_block=1, order="vr"), 16)
    nest = [(lp.index, lp.size, lp.tail) for lp in schedule.compute]
    # 32-wide column panels, k blocks of 128, 8-row tiles, k inside the tile, the 8 x 32 register tile
    assert nest == [("n", 16, 0), ("k", 4, 0), ("m", 64, 0), ("k", 128, 0), ("m", 8, 0), ("n", 32, 0)]


def test_blocks_larger_than_the_sizes_are_clamped():
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 3, "k": 2, "n": 5})
    schedule = tiled_schedule(spec, TileTemplate(14, 4, k_block=256, v_block=256, r_block=128), 16)
    assert [(lp.index, lp.size) for lp in schedule.compute] == [("k", 2), ("m", 3), ("n", 5)]


def test_template_names_round_trip():
    for template in [*TEMPLATES, TileTemplate(8, 3, None, 256, None, "vr")]:
        assert TileTemplate.from_name(template.name()) == template


def test_partial_sums_are_reduced_by_a_shuffle_tree():
    spec = LoopNestSpec.parse(*KINDS["transposed B"])
    schedule = tiled_schedule(spec, TileTemplate(4, 1, pack=False), 8)  # k vectorized: partial sums
    text = generate_ir(spec, schedule, Target(vector_widths=(8,)))
    assert "llvm.vector.reduce.fadd.v8f32" in text and "extractelement" not in text


@pytest.mark.parametrize("kind", list(KINDS))
def test_numpy_reference_computes_the_contraction(kind):
    einsum, sizes = KINDS[kind]
    spec = LoopNestSpec.parse(einsum, sizes)
    how, program = numpy_program(spec)
    expected = {
        "conv NCHW": "im2col+tensordot",
        "conv NHWC": "im2col+tensordot",
        "conv, weights packed": "im2col+tensordot",
        "elementwise": "einsum",
    }
    assert how == expected.get(kind, "matmul")
    rng = np.random.default_rng(1)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    np.testing.assert_allclose(program(lhs, rhs), reference(spec, out, lhs, rhs) - out, rtol=1e-4, atol=1e-4)


def test_packing_moves_the_output_contiguous_index_last_only_where_needed():
    assert packed_layout(LoopNestSpec.parse(*KINDS["matmul"])) is None
    transposed_b = LoopNestSpec.parse(*KINDS["transposed B"])  # k is contiguous everywhere: optional
    assert packed_layout(transposed_b, "k") is None and packed_layout(transposed_b, "n") is not None
    layout = packed_layout(LoopNestSpec.parse(*KINDS["both transposed"]))
    assert layout is not None and layout.orders == (None, (1, 0))
    assert layout.spec.text() == "C[m,n] += A[k,m] * B_packed[k,n]"
    spec = LoopNestSpec.parse(*KINDS["both transposed"])
    text = generate_ir(spec, tiled_schedule(spec, TileTemplate(4, 1), 8), Target(vector_widths=(8,)))
    assert "call void @pack1(ptr %in1, ptr @buffer1)" in text and "fma.v8f32" in text


def test_numpy_reference_is_timed():
    spec = LoopNestSpec.parse(*KINDS["matmul"])
    assert numpy_gflops_of(spec, runs=2, run_seconds=1e-4) > 0
