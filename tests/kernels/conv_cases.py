"""The convolution cases that the NHWC and the NCHW kernel tests share: both layouts' contractions, sizes
that leave tails in every register tile and vector, templates of every shape the cover uses, the two vector
targets, and the check of a compiled kernel against the float64 reference."""

from __future__ import annotations

import numpy as np

from optserve.kernels.codegen import Target
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate
from tests.kernels.kernels_helpers import reference

NHWC = "O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]"
NCHW = "O[n,f,y,x] += I[n,c,y+r,x+s] * W[f,c,r,s]"
# channels that leave a 16-, an 8-float and a scalar tail (45 = 16 + 16 + 8 + 5), rows that leave a register
# tile's tail, windows 3x3, 3x2 and 1x1, two images
SIZES = [
    {"n": 2, "f": 45, "c": 5, "y": 4, "x": 9, "r": 3, "s": 3},
    {"n": 1, "f": 37, "c": 7, "y": 3, "x": 13, "r": 3, "s": 2},
    {"n": 1, "f": 70, "c": 19, "y": 5, "x": 7, "r": 1, "s": 1},
]
TEMPLATES = [
    TileTemplate(6, 4),
    TileTemplate(12, 1, k_block=4, v_block=32, r_block=64),
    TileTemplate(2, 3, k_block=2, order="vr"),
    TileTemplate(14, 2, v_block=1),
]
TARGETS = {"avx512": Target(vector_widths=(16, 8)), "avx2": Target(vector_widths=(8,))}


def sizes_id(sizes: dict[str, int]) -> str:
    return "-".join(f"{k}{v}" for k, v in sizes.items())


def check_kernel(spec: LoopNestSpec, kernel, seed: int = 0) -> None:
    """Run `kernel` (closed after) on random operands and compare with the float64 reference."""
    rng = np.random.default_rng(seed)
    out, lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors)
    expected = reference(spec, out, lhs, rhs)
    try:
        kernel(out, lhs, rhs)
    finally:
        kernel.close()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
