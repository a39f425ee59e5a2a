"""A tensor contraction in Einstein form with constant sizes: what a loop nest computes.

`C[m,n] += A[m,k] * B[k,n]` reads two float32 tensors and accumulates their product into the output; every
index not in the output is summed over. An input dimension may be a sum of indices (`I[c,p+r]`), so a
convolution can be written as a contraction too. Tensors are dense and row-major in the order their
dimensions are written. Specs come only from `LoopNestSpec.parse`, which checks names, sizes and memory
limits, so code is never generated for an unchecked request. No limit bounds the floating-point operations:
the cost of a decision does not grow with them (policies/proxy.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from optserve.config import LoopTuneSettings

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TENSOR = re.compile(rf"^\s*({_NAME})\s*\[([^\]]*)\]\s*$")
_INDEX = re.compile(rf"^{_NAME}$")
FLOAT_BYTES = 4


class SpecError(ValueError):
    """The contraction text, its sizes or its memory needs are not acceptable."""


@dataclass(frozen=True)
class TensorRef:
    """One tensor as written in the contraction: its name and, per dimension, the indices summed there."""

    name: str
    dims: tuple[tuple[str, ...], ...]

    def text(self) -> str:
        return f"{self.name}[{','.join('+'.join(d) for d in self.dims)}]"


@dataclass(frozen=True)
class LoopNestSpec:
    """A validated contraction `output += inputs[0] * inputs[1]` with a size for every index."""

    output: TensorRef
    inputs: tuple[TensorRef, TensorRef]
    sizes: tuple[tuple[str, int], ...]  # every index with its size, in first-use order of the inputs
    # per tensor name, the shape it is laid out with in memory where that is larger than its extent here:
    # a block of a larger contraction (`block`) reads and writes the whole tensors' rows
    layout: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @classmethod
    def parse(
        cls, einsum: str, sizes: Mapping[str, int], limits: LoopTuneSettings | None = None
    ) -> LoopNestSpec:
        """Parse and validate `einsum` (e.g. `C[m,n] += A[m,k] * B[k,n]`) with `sizes` (e.g. m=128)."""
        limits = limits or LoopTuneSettings()
        if len(einsum) > 1000:
            raise SpecError("contraction text is longer than 1000 characters")
        left, sep, right = einsum.partition("+=")
        if not sep:
            raise SpecError(f"expected 'OUT[...] += IN1[...] * IN2[...]', got {einsum!r}")
        factors = right.split("*")
        if len(factors) != 2:
            raise SpecError("the right-hand side must be a product of exactly two tensors")
        output = _parse_tensor(left)
        inputs = (_parse_tensor(factors[0]), _parse_tensor(factors[1]))
        names = [output.name, inputs[0].name, inputs[1].name]
        if len(set(names)) != 3:
            raise SpecError(f"tensor names must be distinct, got {', '.join(names)}")
        for dim in output.dims:
            if len(dim) != 1:
                raise SpecError(f"output dimensions must be single indices, got {output.text()}")
        out_indices = [d[0] for d in output.dims]
        if len(set(out_indices)) != len(out_indices):
            raise SpecError(f"an output index is repeated in {output.text()}")
        order: list[str] = []
        for tensor in inputs:
            for dim in tensor.dims:
                for index in dim:
                    if index not in order:
                        order.append(index)
        for tensor in inputs:
            seen = [i for d in tensor.dims for i in d]
            if len(set(seen)) != len(seen):
                raise SpecError(f"an index appears twice in {tensor.text()}")
        missing_out = [i for i in out_indices if i not in order]
        if missing_out:
            raise SpecError(f"output indices {missing_out} appear in no input")
        unknown = sorted(set(sizes) - set(order))
        if unknown:
            raise SpecError(f"sizes given for unknown indices {unknown}")
        unsized = [i for i in order if i not in sizes]
        if unsized:
            raise SpecError(f"no size given for indices {unsized}")
        checked: list[tuple[str, int]] = []
        for index in order:
            size = sizes[index]
            if isinstance(size, bool) or not isinstance(size, int):
                raise SpecError(f"size of {index} must be an integer, got {size!r}")
            if not 1 <= size <= limits.max_dim:
                raise SpecError(f"size of {index} is {size}, allowed 1..{limits.max_dim}")
            checked.append((index, size))
        if len(order) > limits.max_loops:
            raise SpecError(f"{len(order)} indices, at most {limits.max_loops} loops allowed")
        spec = cls(output=output, inputs=inputs, sizes=tuple(checked))
        for tensor in spec.tensors:
            nbytes = math.prod(spec.shape(tensor)) * FLOAT_BYTES
            if nbytes > limits.max_tensor_bytes:
                raise SpecError(f"{tensor.name} needs {nbytes} bytes, limit is {limits.max_tensor_bytes}")
        return spec

    @property
    def tensors(self) -> tuple[TensorRef, TensorRef, TensorRef]:
        return (self.output, *self.inputs)

    @property
    def size_of(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.sizes)

    @property
    def output_indices(self) -> tuple[str, ...]:
        return tuple(d[0] for d in self.output.dims)

    @property
    def flops(self) -> int:
        """Multiplies and adds of the whole contraction."""
        return 2 * math.prod(size for _, size in self.sizes)

    def shape(self, tensor: TensorRef) -> tuple[int, ...]:
        """The elements of `tensor` the contraction touches, per dimension."""
        size = self.size_of
        return tuple(sum(size[i] - 1 for i in dim) + 1 for dim in tensor.dims)

    def layout_shape(self, tensor: TensorRef) -> tuple[int, ...]:
        """The shape `tensor` is laid out with in memory: its `shape`, or a block's whole tensor's."""
        return dict(self.layout).get(tensor.name, self.shape(tensor))

    def block(self, index: str, size: int) -> LoopNestSpec:
        """The contraction over `size` elements of `index` (from some offset) of the same tensors in memory:
        what one thread of a parallel kernel computes (kernels/parallel.py)."""
        layout = self.layout or tuple((t.name, self.shape(t)) for t in self.tensors)
        sizes = tuple((name, size if name == index else extent) for name, extent in self.sizes)
        return LoopNestSpec(output=self.output, inputs=self.inputs, sizes=sizes, layout=layout)

    def strides(self, tensor: TensorRef) -> dict[str, int]:
        """Elements skipped in `tensor` when one index grows by one (0 for indices it does not use)."""
        shape = self.layout_shape(tensor)
        dim_strides = [math.prod(shape[j + 1 :]) for j in range(len(shape))]
        strides = dict.fromkeys(self.indices, 0)
        for dim, stride in zip(tensor.dims, dim_strides, strict=True):
            for index in dim:
                strides[index] += stride
        return strides

    def text(self) -> str:
        return f"{self.output.text()} += {self.inputs[0].text()} * {self.inputs[1].text()}"

    def sizes_text(self) -> str:
        return ",".join(f"{name}={size}" for name, size in self.sizes)


def parse_sizes(text: str) -> dict[str, int]:
    """`m=128,n=96,k=64` -> {'m': 128, 'n': 96, 'k': 64}."""
    sizes: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _INDEX.match(name):
            raise SpecError(f"expected NAME=SIZE, got {item!r}")
        try:
            sizes[name] = int(value)
        except ValueError:
            raise SpecError(f"size of {name} is not an integer: {value!r}") from None
    return sizes


def _parse_tensor(text: str) -> TensorRef:
    match = _TENSOR.match(text)
    if not match:
        raise SpecError(f"expected NAME[i,j,...], got {text.strip()!r}")
    name, body = match.groups()
    dims = []
    for part in body.split(","):
        terms = tuple(t.strip() for t in part.split("+"))
        if not all(_INDEX.match(t) for t in terms):
            raise SpecError(f"bad index expression {part.strip()!r} in {text.strip()!r}")
        dims.append(terms)
    return TensorRef(name=name, dims=tuple(dims))
