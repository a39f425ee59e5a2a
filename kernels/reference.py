"""numpy's way of computing a contraction, and its GFLOPS: the reference a schedule is compared with.

`numpy_program(spec)` returns what a numpy user would write for the contraction, as a function of the
operands: `np.matmul` on (possibly transposed, batched) views for matmul-like contractions, so OpenBLAS
handles the layout itself; im2col (`sliding_window_view`) followed by `np.tensordot` for contractions with
a summed dimension such as `I[c,y+r,x+s]`; `np.einsum(optimize=True)` for anything else. Set
OPENBLAS_NUM_THREADS=1 before numpy loads for the single-thread reference.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from optserve.kernels.spec import LoopNestSpec

Program = Callable[[np.ndarray, np.ndarray], np.ndarray]


def numpy_program(spec: LoopNestSpec) -> tuple[str, Program]:
    """(how, f) with f(lhs, rhs) = the contraction of the two inputs, shaped like the output."""
    if any(len(dim) > 1 for t in spec.inputs for dim in t.dims):
        return "im2col+tensordot", _im2col_program(spec)
    matmul = _matmul_program(spec)
    if matmul is not None:
        return "matmul", matmul
    letters = {index: chr(ord("a") + j) for j, index in enumerate(spec.indices)}
    expr = ",".join("".join(letters[d[0]] for d in t.dims) for t in spec.inputs)
    expr += "->" + "".join(letters[i] for i in spec.output_indices)
    return "einsum", lambda lhs, rhs: np.einsum(expr, lhs, rhs, optimize=True)


def _matmul_program(spec: LoopNestSpec) -> Program | None:
    """np.matmul on views when the indices split into batch (everywhere), rows (lhs, out), columns (rhs,
    out) and one reduction group (both inputs); None otherwise."""
    out = set(spec.output_indices)
    lhs, rhs = ({d[0] for d in t.dims} for t in spec.inputs)
    batch = [i for i in spec.output_indices if i in lhs and i in rhs]
    rows = [i for i in spec.output_indices if i in lhs and i not in rhs]
    cols = [i for i in spec.output_indices if i in rhs and i not in lhs]
    red = [i for i in spec.indices if i not in out]
    if len(rows) > 1 or len(cols) > 1 or len(red) != 1 or red[0] not in lhs & rhs:
        return None
    size = spec.size_of
    lhs_order = [d[0] for d in spec.inputs[0].dims]
    rhs_order = [d[0] for d in spec.inputs[1].dims]
    out_order = list(spec.output_indices)
    (k,) = red

    def view(array: np.ndarray, order: list[str], want: list[str]) -> np.ndarray:
        return array.transpose([order.index(i) for i in want])

    def program(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        left = view(a, lhs_order, [*batch, *rows, k])
        right = view(b, rhs_order, [*batch, k, *cols])
        if batch and not rows:  # a vector of a batch is a one-row matrix; alone it stays 1-D (gemv)
            left = left[..., None, :]
        if batch and not cols:
            right = right[..., None]
        product = np.matmul(left, right)
        shape = [size[i] for i in [*batch, *rows, *cols]]
        return product.reshape(shape).transpose([[*batch, *rows, *cols].index(i) for i in out_order])

    return program


def _im2col_program(spec: LoopNestSpec) -> Program:
    """Windows of the input with summed dimensions (`p+r`) as a strided view, then one tensordot."""
    size = spec.size_of
    conv = next(j for j in (0, 1) if any(len(d) > 1 for d in spec.inputs[j].dims))
    other = spec.inputs[1 - conv]
    window_dims = spec.inputs[conv].dims
    # view axes: each plain dimension once, each summed dimension p+r as two axes (p, then r)
    axes: list[str] = []
    for dim in window_dims:
        axes.extend(dim)
    out_order = list(spec.output_indices)
    other_order = [d[0] for d in other.dims]
    contracted = [i for i in axes if i in other_order and i not in out_order]

    def program(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        image, weights = (a, b) if conv == 0 else (b, a)
        view = image
        for j, dim in enumerate(window_dims):  # windows over every summed dimension
            if len(dim) > 1:
                window = size[dim[1]] if len(dim) == 2 else None
                if window is None:
                    raise ValueError("only p+r dimensions are supported by the numpy reference")
                view = np.lib.stride_tricks.sliding_window_view(view, window, axis=j)
        # sliding_window_view puts each window axis last, in the order the dimensions were windowed
        names = [d[0] for d in window_dims] + [d[1] for d in window_dims if len(d) > 1]
        result = np.tensordot(
            view,
            weights,
            axes=([names.index(i) for i in contracted], [other_order.index(i) for i in contracted]),
        )
        kept = [i for i in names if i not in contracted] + [i for i in other_order if i not in contracted]
        return result.transpose([kept.index(i) for i in out_order])

    return program


def numpy_gflops_of(spec: LoopNestSpec, runs: int = 10, run_seconds: float = 2e-3, seed: int = 0) -> float:
    """numpy's GFLOPS for the contraction (`numpy_program`): warm-up, then best of `runs` timed runs."""
    _, program = numpy_program(spec)
    rng = np.random.default_rng(seed)
    lhs, rhs = (rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.inputs)
    start = time.perf_counter()
    for _ in range(3):
        program(lhs, rhs)
    repeats = max(1, math.ceil(run_seconds / ((time.perf_counter() - start) / 3)))
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(repeats):
            program(lhs, rhs)
        best = min(best, (time.perf_counter() - start) / repeats)
    return spec.flops / best / 1e9
