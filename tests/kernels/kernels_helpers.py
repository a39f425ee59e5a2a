"""Shared helpers for the kernel tests: random legal schedules and a numpy reference."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from optserve.kernels.schedule import Loop, Schedule, split_loop
from optserve.kernels.spec import LoopNestSpec


def reference(spec: LoopNestSpec, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """out + contraction, computed in float64 by explicit index arithmetic (handles p+r dimensions)."""
    size = spec.size_of
    grids = np.meshgrid(*[np.arange(size[i]) for i in spec.indices], indexing="ij")
    index = dict(zip(spec.indices, grids, strict=True))

    def gather(tensor, array):
        coords = tuple(sum(index[i] for i in dim) for dim in tensor.dims)
        return array.astype(np.float64)[coords]

    product = gather(spec.inputs[0], lhs) * gather(spec.inputs[1], rhs)
    reduced = [a for a, i in enumerate(spec.indices) if i not in spec.output_indices]
    summed = product.sum(axis=tuple(reduced)) if reduced else product
    kept = [i for i in spec.indices if i in spec.output_indices]
    summed = np.transpose(summed, [kept.index(i) for i in spec.output_indices])
    return out.astype(np.float64) + summed


@st.composite
def random_schedule(draw, spec: LoopNestSpec, max_splits: int = 4) -> Schedule:
    """A legal schedule: random splits (any factor, tails allowed), then a random order keeping each
    index's loops in their nesting order."""
    nest: tuple[Loop, ...] = Schedule.base(spec).compute
    for _ in range(draw(st.integers(0, max_splits))):
        candidates = [p for p, lp in enumerate(nest) if lp.size >= 2]
        if not candidates:
            break
        pos = draw(st.sampled_from(candidates))
        factor = draw(st.integers(2, nest[pos].size))
        nest = split_loop(nest, pos, factor)
    keys = draw(st.permutations(range(len(nest))))
    order: list[Loop] = []
    per_index = {i: [lp for lp in nest if lp.index == i] for i in spec.indices}
    used = dict.fromkeys(spec.indices, 0)
    for key in keys:  # walk a random interleaving of the per-index chains
        index = nest[key].index
        order.append(per_index[index][used[index]])
        used[index] += 1
    return Schedule(compute=tuple(order), writeback=Schedule.base(spec).writeback)
