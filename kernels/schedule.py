"""A loop schedule: loop order and splits with tails, as in LoopTool/LoopTune.

The schedule holds two nests. The compute nest runs the multiply-add over every index; the write-back nest
runs over the output indices. A loop is `for <index> in <size> r <tail>`: `size` full iterations of the
loops below it (for the same index) and then one partial iteration of `tail` elements. The extent one
iteration of a loop covers is the full extent of the next loop below it over the same index (1 for the
innermost one), so `split` never needs to know anything but the loop it splits.

Our backend accumulates straight into the output from registers, so the write-back nest generates no code;
it is kept so the published state and action space (which see and move it) stay unchanged.

A schedule may end with `pack A`: the inputs the kernel copies into the layout its register tile reads
before running the nest (kernels/packing.py: an `A[k,m]` read transposed, copied in panels). The loop
nest is the same either way, so the choice is part of the schedule (tile templates make it); without the
line, and in the state the agent sees, nothing changes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from optserve.kernels.packing import panel_packable, panel_row, row_packable
from optserve.kernels.spec import LoopNestSpec, SpecError

_PACK = re.compile(r"^\s*pack\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*$")
_LINE = re.compile(r"^\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+(\d+)(?:\s+r\s+(\d+))?\s*:?\s*$")


@dataclass(frozen=True)
class Loop:
    index: str
    size: int
    tail: int = 0


@dataclass(frozen=True)
class Schedule:
    """Compute nest and write-back nest, each listed outermost first."""

    compute: tuple[Loop, ...]
    writeback: tuple[Loop, ...]
    # inputs packed in panels (kernels/packing.py: row_packable along the reduction, column_packable)
    pack: tuple[str, ...] = ()

    @classmethod
    def base(cls, spec: LoopNestSpec) -> Schedule:
        """The untiled nest: one loop per index in first-use order (matmul: m, k, n), then the write-back."""
        size = spec.size_of
        return cls(
            compute=tuple(Loop(i, size[i]) for i in spec.indices),
            writeback=tuple(Loop(i, size[i]) for i in spec.output_indices),
        )

    @property
    def loops(self) -> tuple[Loop, ...]:
        """Both nests in the order the agent's cursor walks them (pre-order)."""
        return self.compute + self.writeback

    def text(self) -> str:
        """One loop per line, indented by depth; the compute and write-back bodies named where they sit."""
        lines = []
        for depth, loop in enumerate(self.compute):
            lines.append("  " * depth + _loop_text(loop))
        lines.append("  " * len(self.compute) + "compute")
        for depth, loop in enumerate(self.writeback):
            lines.append("  " * depth + _loop_text(loop))
        lines.append("  " * len(self.writeback) + "write-back")
        if self.pack:
            lines.append("pack " + ", ".join(self.pack))
        return "\n".join(lines)

    @classmethod
    def from_text(cls, text: str) -> Schedule:
        """Parse `text()` output (indentation is ignored; `compute` and `write-back` end the nests, a
        `pack` line may follow)."""
        nests: list[list[Loop]] = [[], []]
        nest = 0
        pack: tuple[str, ...] = ()
        for raw in text.strip().splitlines():
            line = raw.strip()
            if line in ("compute", "write-back"):
                nest += 1
                continue
            packed = _PACK.match(line)
            if packed and nest == 2 and not pack:
                pack = tuple(name.strip() for name in packed.group(1).split(","))
                continue
            match = _LINE.match(line)
            if not match or nest > 1:
                raise SpecError(f"bad schedule line {raw!r} (expected 'for <index> in <size> r <tail>')")
            index, size, tail = match.groups()
            nests[nest].append(Loop(index, int(size), int(tail or 0)))
        return cls(compute=tuple(nests[0]), writeback=tuple(nests[1]), pack=pack)

    def compute_key(self) -> str:
        """Hash of what decides the generated code (the compute nest): the evaluation cache key."""
        body = ";".join(f"{lp.index}:{lp.size}:{lp.tail}" for lp in self.compute)
        if self.pack:  # only then: the keys of every schedule without packing stay as they were
            body += ";pack:" + ",".join(self.pack)
        return hashlib.sha1(body.encode()).hexdigest()[:16]

    def key(self) -> str:
        body = self.text()
        return hashlib.sha1(body.encode()).hexdigest()[:16]

    def check(self, spec: LoopNestSpec, max_loops: int | None = None) -> None:
        """Raise SpecError unless both nests cover every element of their indices exactly once."""
        if max_loops is not None and len(self.loops) > max_loops:
            raise SpecError(f"{len(self.loops)} loops, at most {max_loops} allowed")
        _check_nest(self.compute, spec.size_of, set(spec.indices), "compute")
        _check_nest(self.writeback, spec.size_of, set(spec.output_indices), "write-back")
        if self.pack:
            allowed = panel_packable(spec)
            wrong = [name for name in self.pack if name not in allowed]
            if wrong or len(set(self.pack)) != len(self.pack):
                raise SpecError(
                    f"cannot pack {', '.join(self.pack)}: only inputs read with an output index last and a"
                    f" reduction index of their own ({', '.join(allowed) or 'none here'}), each once"
                )
            if self.compute and self.compute[-1].index != spec.output.dims[-1][0]:
                raise SpecError(
                    f"pack needs the innermost loop over {spec.output.dims[-1][0]}, the output's contiguous"
                    " index (the register tile broadcasts the packed input along it)"
                )
            rows = row_packable(spec)  # the others have no fallback: their panels must stay whole
            for tensor in (t for t in spec.inputs if t.name in self.pack and t.name not in rows):
                row = panel_row(spec, tensor)
                if not whole_panels(self.compute, row):
                    raise SpecError(
                        f"pack {tensor.name} in panels needs the innermost loop over {row} without a tail"
                        " and every outer loop over it a whole number of its iterations"
                    )


def whole_panels(nest: tuple[Loop, ...], index: str | None = None) -> bool:
    """Every loop over `index` (None: the innermost loop's) steps by whole multiples of the innermost
    loop over it, which has no tail: a panel of that many elements is never split (kernels/packing.py)."""
    index = index or nest[-1].index
    loops = [(lp, e) for lp, e in zip(nest, iteration_extents(nest), strict=True) if lp.index == index]
    if not loops or loops[-1][0].tail:
        return False
    width = loops[-1][0].size
    return all(extent % width == 0 for _, extent in loops[:-1])


def split_loop(nest: tuple[Loop, ...], pos: int, factor: int) -> tuple[Loop, ...]:
    """Split loop `pos`: {size, tail} over `total` elements -> outer {total // (f*e), rest} over inner {f, 0}.

    Raises SpecError when the loop has fewer than `factor` iterations.
    """
    loop = nest[pos]
    if factor < 2 or loop.size < factor:
        raise SpecError(f"cannot split {_loop_text(loop)} by {factor}")
    extent = iteration_extents(nest)[pos]
    total = loop.size * extent + loop.tail
    outer = Loop(loop.index, total // (factor * extent), total % (factor * extent))
    return (*nest[:pos], outer, Loop(loop.index, factor, 0), *nest[pos + 1 :])


def iteration_extents(nest: tuple[Loop, ...]) -> list[int]:
    """Elements of its index that one full iteration of each loop covers."""
    extents = [1] * len(nest)
    below: dict[str, int] = {}
    for pos in range(len(nest) - 1, -1, -1):
        loop = nest[pos]
        extents[pos] = below.get(loop.index, 1)
        below[loop.index] = loop.size * extents[pos] + loop.tail
    return extents


def covered_extents(nest: tuple[Loop, ...]) -> dict[str, int]:
    """Elements of each index the nest covers (the full extent of its outermost loop over the index)."""
    extents = iteration_extents(nest)
    covered: dict[str, int] = {}
    for loop, extent in zip(nest, extents, strict=True):
        covered.setdefault(loop.index, loop.size * extent + loop.tail)
    return covered


def _check_nest(nest: tuple[Loop, ...], size: dict[str, int], indices: set[str], name: str) -> None:
    used = {lp.index for lp in nest}
    if used != indices:
        raise SpecError(f"{name} nest loops over {sorted(used)}, expected {sorted(indices)}")
    extents = iteration_extents(nest)
    for loop, extent in zip(nest, extents, strict=True):
        if loop.size < 1 or not 0 <= loop.tail < extent:
            raise SpecError(f"{name} loop {_loop_text(loop)} needs size >= 1 and 0 <= tail < {extent}")
    for index, covered in covered_extents(nest).items():
        if covered != size[index]:
            raise SpecError(f"{name} nest covers {covered} elements of {index}, its size is {size[index]}")


def _loop_text(loop: Loop) -> str:
    tail = f" r {loop.tail}" if loop.tail else ""
    return f"for {loop.index} in {loop.size}{tail}"
