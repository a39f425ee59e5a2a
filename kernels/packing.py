"""Operand packing: when no index is contiguous in every tensor, copy an input into a layout where one is.

`C[m,n] += A[k,m] * B[n,k]` has no index along which every tensor is contiguous or constant, so every
schedule of it runs scalar. Packing B as `B'[k,n]` (its output-contiguous index last) makes `n` contiguous
everywhere, and the contraction becomes an ordinary matmul. The kernel then copies B into a buffer of its
own at every call (a loop nest writing the buffer in order, counted in the kernel's time) and runs the
scheduled nest on the packed operand. The schedule does not change: it names indices, not layouts, so
packing is the backend's decision, made from the strides alone (`packed_layout`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optserve.kernels.spec import LoopNestSpec, TensorRef


@dataclass(frozen=True)
class PackedLayout:
    """The contraction on packed operands and, per input, the order its dimensions are copied in."""

    spec: LoopNestSpec  # inputs in their packed layouts (same indices and sizes)
    orders: tuple[tuple[int, ...] | None, tuple[int, ...] | None]  # per input: source dims in packed order


def packed_layout(spec: LoopNestSpec) -> PackedLayout | None:
    """None when an index is already contiguous or constant in every tensor (or packing cannot make one);
    else the inputs that block the output's contiguous index, with that index's dimension moved last."""
    strides = [spec.strides(t) for t in spec.tensors]
    if any(all(s[i] in (0, 1) for s in strides) for i in spec.indices):
        return None
    vector = spec.output.dims[-1][0]
    inputs: list[TensorRef] = []
    orders: list[tuple[int, ...] | None] = []
    for tensor, tensor_strides in zip(spec.inputs, strides[1:], strict=True):
        if tensor_strides[vector] in (0, 1):
            inputs.append(tensor)
            orders.append(None)
            continue
        where = [j for j, dim in enumerate(tensor.dims) if vector in dim]
        if len(where) != 1 or len(tensor.dims[where[0]]) != 1:
            return None  # the index is part of a summed dimension (p+r): no plain transpose makes it last
        order = tuple(j for j in range(len(tensor.dims)) if j != where[0]) + (where[0],)
        inputs.append(TensorRef(f"{tensor.name}_packed", tuple(tensor.dims[j] for j in order)))
        orders.append(order)
    packed = LoopNestSpec(output=spec.output, inputs=(inputs[0], inputs[1]), sizes=spec.sizes)
    if not any(
        all(s[i] in (0, 1) for s in (packed.strides(t) for t in packed.tensors)) for i in spec.indices
    ):
        return None
    return PackedLayout(packed, (orders[0], orders[1]))


def pack_function_ir(name: str, shape: tuple[int, ...], order: tuple[int, ...]) -> str:
    """IR of `name(src, dst)`: dst (dimensions in `order`) = src (row-major `shape`), written in order."""
    dst_shape = [shape[j] for j in order]
    src_strides = [math.prod(shape[j + 1 :]) for j in range(len(shape))]
    depth = len(order)
    lines = [
        f"define internal void @{name}(ptr noalias nocapture readonly %src, ptr noalias nocapture %dst) {{"
    ]
    lines += ["entry:", "  br label %l0"]
    for level in range(depth):
        pre = "entry" if level == 0 else f"l{level - 1}"
        latch = f"l{level}" if level == depth - 1 else f"e{level + 1}"
        lines += [f"l{level}:", f"  %i{level} = phi i64 [ 0, %{pre} ], [ %n{level}, %{latch} ]"]
        if level < depth - 1:
            lines.append(f"  br label %l{level + 1}")
    # innermost body: one element, source offset from the counters, destination offset in order
    src_terms = [f"%i{level}" for level in range(depth)]
    offset_src, offset_dst = "0", "0"
    for level, j in enumerate(order):
        lines.append(f"  %s{level} = mul nuw nsw i64 {src_terms[level]}, {src_strides[j]}")
        lines.append(f"  %as{level} = add nuw nsw i64 {offset_src}, %s{level}")
        offset_src = f"%as{level}"
        dst_stride = math.prod(dst_shape[level + 1 :])
        lines.append(f"  %d{level} = mul nuw nsw i64 {src_terms[level]}, {dst_stride}")
        lines.append(f"  %ad{level} = add nuw nsw i64 {offset_dst}, %d{level}")
        offset_dst = f"%ad{level}"
    lines += [
        f"  %from = getelementptr inbounds float, ptr %src, i64 {offset_src}",
        f"  %to = getelementptr inbounds float, ptr %dst, i64 {offset_dst}",
        "  %value = load float, ptr %from, align 4",
        "  store float %value, ptr %to, align 4",
    ]
    for level in range(depth - 1, -1, -1):
        lines += [
            f"  %n{level} = add nuw nsw i64 %i{level}, 1",
            f"  %c{level} = icmp ult i64 %n{level}, {dst_shape[level]}",
            f"  br i1 %c{level}, label %l{level}, label %e{level}",
            f"e{level}:",
        ]
    lines += ["  ret void", "}"]
    return "\n".join(lines)
