"""Multi-level tiled schedules for any contraction: register tile, cache blocks, unroll-and-jam.

A tiled schedule is an ordinary `Schedule` (loop order and splits with tails), so the code generator, the
checks and the environment need nothing new; this module only knows which loops to make:

    other output indices            (batch, image, output row: outermost, whole)
    vector block     v: V / v_block (cache block of the vectorized index)
    reduction block  k: K / k_block (L1/L2 block of the main reduction index)
    row block        r: R / r_block
    tile loops       r: r_block / mr  and  v: v_block / (nv * width), in either order ("rv" or "vr")
    reductions       other reduction indices, then k: k_block          (runtime loops inside the tile)
    register tile    r: mr (unrolled and jammed), v: nv * width (innermost, vectorized, unrolled)

Inside the register tile the code generator unrolls the output loops and keeps mr * nv accumulators in
registers across the reduction loops (unroll-and-jam). `roles` picks the indices from the strides: the
vector index is contiguous or constant in every tensor (an output index, else a reduction index kept as
vector partial sums), the row index reuses one operand's vector load across rows. A template's `pack`
(the default; `-u` in a name turns it off) reads the strides of the packed operands where the backend may
pack (kernels/packing.py): for `A·B^T` the vector index is then n on a packed B (an ordinary matmul), and
without it k (partial sums); the schedule's innermost loop tells the code generator which one it got. For
`A^T·B` and `A^T·B^T` it also packs A (read `A[k,m]`) in panels of the register tile's rows, so the tile
reads A as one contiguous stream; the loop nest is the same, so the schedule says so in its `pack` line.
For an NCHW convolution it vectorizes the output channels on packed weights, the image row its register
tile's rows (kernels/packing.py `channel_vector`), and its twin the image row. From PANEL_FLOATS it also
packs B (and A[m,k] under a tall register tile) in panels (`large_panels`), as BLIS does: a 2048^3 matmul
read unpacked is bound by B's 8 KiB row stride, not by the FMAs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optserve.kernels.packing import (
    channel_vector,
    column_packable,
    packed_layout,
    packing_required,
    panel_row,
    row_packable,
    transposed_panel_packable,
)
from optserve.kernels.schedule import Loop, Schedule, whole_panels
from optserve.kernels.spec import LoopNestSpec

# inputs of this many floats or more (1 MiB: 512 x 512) are packed in panels (large_panels). A larger matmul
# is decided on a sub-problem that keeps its reduction whole and cuts its outputs (policies/proxy.py
# `timed_spec`: 256 x 2048 x 256 for 2048^3 at one thread, 1024 x 2048 x 1024 on 16), whose operands of
# the whole's depth are mostly this large too, so its candidates are timed with the panels the whole runs on
# (when they were timed without, at 1000-2048^3 the decision compared kernels that never ran, and kept 4x4,
# first there, where 8x2 and 12x1 are faster on panels)
PANEL_FLOATS = 2**18
PANEL_REUSE = 32  # reads of each element from which packing it pays (as policies/tiles.py PACK_REUSE)
PANEL_ROWS = 8  # register tile rows from which the broadcast operand's panels pay
# multiply-adds per accumulator from which a register tile gathered and scattered (NCHW's channels) pays
# for its opening: its reduction block is at least this many steps of (c, r, s); a 1x1 convolution's tile
# with a block of 4 channels spent more on its gathers than its FMAs (resnet conv4 1x1 reduce: 6 GFLOPS,
# 79 with the whole reduction in the tile)
GATHERED_STEPS = 64
# floats of an NHWC convolution's weights from which the image columns run inside the tile loops
# (weights_inside): on the lent Xeon (2 MiB L2) at 1 thread, inside vs outside on every template, resnet conv5
# (2.4 M floats) 25-70 -> 55-103 GFLOPS, conv4 3x3 (590 K) 56-127 -> 67-146, conv4 1x1 reduce (262 K) the
# same or lower (its k-blocked tiles 80 -> 26-35), conv3 3x3 (147 K) either way
INSIDE_FLOATS = 2**19


@dataclass(frozen=True)
class Roles:
    """What each index of a contraction does in a tiled schedule."""

    vector: str  # innermost loop (vectorized when every tensor is contiguous or constant along it)
    partial: bool  # the vector index is a reduction index: accumulators are vector partial sums
    rows: tuple[str, ...]  # output indices unrolled in the register tile (one; two with partial sums)
    reduction: str | None  # main reduction index: blocked for the caches, innermost runtime loop
    reductions: tuple[str, ...]  # other reduction indices, runtime loops around the main one
    outer: tuple[str, ...]  # the remaining indices, outermost, unsplit
    # the main reduction's loop inside the tile runs around the others instead: where every input that
    # reads it strides further along it than along any of them (NCHW's channel c, a plane apart, around
    # the window's r and s), so the innermost loops walk neighbouring floats, not one page a step
    reduction_outside: bool = False


@dataclass(frozen=True)
class TileTemplate:
    """Register tile and cache blocks, independent of the shape (blocks are clamped to it)."""

    rows: int  # mr: elements of the row index(es) per register tile
    vectors: int  # nv: vectors of the innermost index per register tile
    k_block: int | None = None  # elements of the main reduction index per block (None: all)
    v_block: int | None = None  # elements of the vector index per block, rounded to the tile (None: all)
    r_block: int | None = None  # elements of the row index per block, rounded to the tile (None: all)
    order: str = "rv"  # which tile loop is outer: "rv" (rows) or "vr" (vector index)
    # vectorize the output's contiguous index, packing an input strided along it (kernels/packing.py),
    # rather than a reduction index contiguous everywhere (partial sums), and pack an input read with the
    # reduction not last (A[k,m]) along it; only A.B^T-, A^T.B- and A^T.B^T-like kinds differ
    pack: bool = True

    def name(self) -> str:
        blocks = [
            f"{key}{value}"
            for key, value in (("k", self.k_block), ("v", self.v_block), ("r", self.r_block))
            if value
        ]
        if not self.pack:
            blocks.append("u")  # unpacked
        return f"{self.rows}x{self.vectors}{self.order}" + ("-" + "-".join(blocks) if blocks else "")

    @classmethod
    def from_name(cls, name: str) -> TileTemplate:
        head, *blocks = name.split("-")
        rows, rest = head.split("x")
        values = {part[0]: int(part[1:]) for part in blocks if part != "u"}
        return cls(
            rows=int(rows),
            vectors=int(rest[:-2]),
            order=rest[-2:],
            k_block=values.get("k"),
            v_block=values.get("v"),
            r_block=values.get("r"),
            pack="u" not in blocks,
        )


# measured first by an NHWC convolution's decision (`channels_last_first`), widest first: on the lent Xeon at
# 1 thread 14x2 came within 5 % of the best of ten templates on every layer of the benchmark's NHWC group
# (8x2 and 6x4 next), where the cover's own order (the matmuls': small k-blocked tiles first) had single
# quick timings pick 4x4 or 4x1 on some (resnet conv2 3x3: 4x4 at 120 GFLOPS, 14x2 168)
CHANNELS_LAST_TILES = (
    TileTemplate(14, 2),
    TileTemplate(8, 2, v_block=256, r_block=128),
    TileTemplate(6, 4, k_block=64, r_block=64),
)


def roles(spec: LoopNestSpec, pack: bool = True) -> Roles:
    """Index roles from the strides (see the module docstring), of the packed operands where the backend
    packs (kernels/packing.py: where it must, or with `pack` where it may); every contraction has some."""
    rows = row_packable(spec) if pack else ()
    channel = channel_vector(spec) if pack else None
    if channel:  # NCHW: the output channels, the weights packed with them last (kernels/packing.py)
        layout = packed_layout(spec, inner=channel)
    else:
        layout = packed_layout(spec, rows=rows) if pack or packing_required(spec) else None
    spec = layout.spec if layout else spec
    strides = [spec.strides(t) for t in spec.tensors]
    size = spec.size_of
    outputs = spec.output_indices
    reductions = [i for i in spec.indices if i not in outputs]
    contiguous = [i for i in spec.indices if all(s[i] in (0, 1) for s in strides)]
    vector_outputs = [i for i in contiguous if i in outputs and strides[0][i] == 1]
    vector_reductions = [i for i in contiguous if i in reductions]
    if channel:
        vector, partial = channel, False
    elif vector_outputs:
        vector, partial = max(vector_outputs, key=lambda i: size[i]), False
    elif vector_reductions:
        vector, partial = max(vector_reductions, key=lambda i: size[i]), True
    else:  # nothing is contiguous everywhere: scalar code along the output's fastest index
        vector, partial = min(outputs, key=lambda i: (strides[0][i], -size[i])), False

    others = [i for i in outputs if i != vector and size[i] > 1]
    elements = [math.prod(spec.shape(t)) for t in spec.inputs]

    def reread(index: str) -> int:
        """Input elements read again by the output loops left outside the tile if `index` takes its rows:
        each input once per element of those it does not read (an NCHW row layout: rows over the output
        channel f re-read the weights once per image row y, 147 KB each for vgg conv1_2; rows over y would
        re-read the whole 13 MB image once per channel)."""
        outside = [i for i in others if i != index]
        return sum(
            count * math.prod(size[i] for i in outside if s[i] == 0)
            for count, s in zip(elements, strides[1:], strict=True)
        )

    def reuse(index: str) -> tuple[int, int, int, int]:
        """Rows that reuse an input's vector (stride 0 in it) first, then those that leave the least to read
        again outside the tile (`reread`: the same for every matmul kind), then the larger ones; on
        channels, of equal size, the output's contiguous index (the broadcast image row's neighbours)."""
        contiguous = bool(channel) and strides[0][index] == 1
        return (any(s[index] == 0 for s in strides[1:]), -reread(index), size[index], contiguous)

    candidates = sorted(others, key=reuse, reverse=True)
    rows = tuple(candidates[: 2 if partial else 1])
    rest = [i for i in reductions if i != vector]
    reduction = max(rest, key=lambda i: size[i]) if rest else None
    others = [i for i in rest if i != reduction]
    readers = [s for s in strides[1:] if reduction and s[reduction]]
    outside = bool(others and readers) and all(s[reduction] > max(s[i] for i in others) for s in readers)
    return Roles(
        vector=vector,
        partial=partial,
        rows=rows,
        reduction=reduction,
        reductions=tuple(others),
        reduction_outside=outside,
        outer=tuple(i for i in spec.indices if i not in (vector, *rows, *rest)),
    )


def tiled_schedule(
    spec: LoopNestSpec, template: TileTemplate, width: int, inside: bool | None = None
) -> Schedule:
    """The schedule of `template` on `spec` for `width`-float vectors (blocks clamped to the sizes).
    `inside`: run the outer indices `weights_inside` names inside the tile loops (None: where it names
    them; True: every outer index the vectorized operand does not read; False: none)."""
    role = roles(spec, template.pack)
    moved = weights_inside(spec, role) if inside is None else _weight_outer(spec, role) if inside else ()
    size = spec.size_of
    nr = min(size[role.vector], template.vectors * width)
    v_block = _block(size[role.vector], template.v_block, nr)
    v_levels = _levels(role.vector, size[role.vector], [v_block, nr])
    row_tiles = _row_tiles(role.rows, size, template.rows)
    row_levels = {}
    for index, mr in row_tiles.items():
        r_block = _block(size[index], template.r_block, mr) if index == role.rows[0] else mr
        row_levels[index] = _levels(index, size[index], [r_block, mr])
    k_levels = []
    if role.reduction:
        k_block = min(template.k_block or size[role.reduction], size[role.reduction])
        if role.vector != spec.output.dims[-1][0] and role.vector == channel_vector(spec):
            window = math.prod(size[i] for i in role.reductions)
            k_block = min(max(k_block, -(-GATHERED_STEPS // window)), size[role.reduction])
        k_levels = _levels(role.reduction, size[role.reduction], [k_block])
    compute: list[Loop] = [Loop(i, size[i]) for i in role.outer if i not in moved]
    # cache blocks, outermost first; a level equal to the whole extent makes no loop
    compute += v_levels[:-2] + k_levels[:-1]
    for index in role.rows:
        compute += row_levels[index][:-2]
    tile_loops = {"r": [row_levels[i][-2] for i in role.rows], "v": [v_levels[-2]]}
    for key in template.order:
        compute += [lp for lp in tile_loops[key] if lp is not None]
    compute += [Loop(i, size[i]) for i in role.outer if i in moved]
    window = [Loop(i, size[i]) for i in role.reductions]
    compute += k_levels[-1:] + window if role.reduction_outside else window + k_levels[-1:]
    compute += [row_levels[i][-1] for i in role.rows] + [v_levels[-1]]
    packed = row_packable(spec) if template.pack and role.vector == spec.output.dims[-1][0] else ()
    nest = tuple(lp for lp in compute if lp is not None)
    if packed or (template.pack and role.vector == spec.output.dims[-1][0]):
        packed = tuple(t.name for t in spec.inputs if t.name in packed + large_panels(spec, nest, template))
    return Schedule(nest, Schedule.base(spec).writeback, packed)


def _weight_outer(spec: LoopNestSpec, role: Roles) -> tuple[str, ...]:
    """Outer indices (of more than one element) that no input read along the output's contiguous vector
    index reads (an NHWC convolution's image column x: the weights W[r,s,c,f] are the same for every x)."""
    vector = spec.output.dims[-1][0]
    if role.vector != vector or not role.rows:
        return ()
    readers = [spec.strides(t) for t in spec.inputs if spec.strides(t)[vector]]
    size = spec.size_of
    return tuple(i for i in role.outer if size[i] > 1 and readers and all(s[i] == 0 for s in readers))


def weights_inside(spec: LoopNestSpec, role: Roles) -> tuple[str, ...]:
    """The outer indices a tiled schedule runs inside its tile loops, next to the reductions: those of
    `_weight_outer` where the operand they do not read holds INSIDE_FLOATS floats or more. Outside, each of
    their elements streams that whole operand once more (resnet conv5 in NHWC: the 9.4 MB of weights 7
    times, once per image column); inside, one register tile's panel of it is read from the caches for all
    of them, and the other input (the image, a few hundred KB on such layers) once per panel instead."""
    moved = _weight_outer(spec, role)
    vector = spec.output.dims[-1][0]
    weights = [t for t in spec.inputs if spec.strides(t)[vector]]
    if not moved or sum(math.prod(spec.shape(t)) for t in weights) < INSIDE_FLOATS:
        return ()
    return moved


def channels_last_first(spec: LoopNestSpec, templates: list[TileTemplate]) -> list[TileTemplate]:
    """`templates` with CHANNELS_LAST_TILES first for a convolution whose output channels are its
    contiguous index (NHWC: an input reads a sum of indices, `x+s`, and no output index is moved to the
    vector as in NCHW, `channel_vector`); else `templates` as they are."""
    windowed = any(len(dim) > 1 for tensor in spec.inputs for dim in tensor.dims)
    if not windowed or channel_vector(spec):
        return templates
    return list(CHANNELS_LAST_TILES) + [t for t in templates if t not in CHANNELS_LAST_TILES]


def large_panels(spec: LoopNestSpec, nest: tuple[Loop, ...], template: TileTemplate) -> tuple[str, ...]:
    """The inputs a tiled schedule packs in panels for their size, as BLIS and GotoBLAS pack B and A
    (kernels/packing.py, the fourth and fifth cases): an input of PANEL_FLOATS floats or more read at a
    whole row's stride per step of the reduction, reused across another output index (the copy is paid
    per call); the vectorized operand (B) then, and the broadcast one (A[m,k]) where the register tile
    has PANEL_ROWS rows or more (its rows, a whole row apart, then exceed the L1's ways). Only where the
    nest's loops keep those panels whole."""
    vector = spec.output.dims[-1][0]
    size = spec.size_of
    names = []
    for tensor in spec.inputs:
        if tensor.name not in column_packable(spec) + transposed_panel_packable(spec):
            continue
        if math.prod(spec.shape(tensor)) < PANEL_FLOATS:
            continue
        strides = spec.strides(tensor)
        reuse = math.prod(size[i] for i in spec.output_indices if strides[i] == 0)
        broadcast = strides[vector] == 0
        if reuse < PANEL_REUSE or (broadcast and template.rows < PANEL_ROWS):
            continue
        if whole_panels(nest, panel_row(spec, tensor)):
            names.append(tensor.name)
    return tuple(names)


def _row_tiles(rows: tuple[str, ...], size: dict[str, int], mr: int) -> dict[str, int]:
    """Register extent per row index: all of mr on the first; with two, mr split as evenly as possible."""
    if len(rows) < 2:
        return {index: min(mr, size[index]) for index in rows}
    first = min(size[rows[0]], max(1, round(math.sqrt(mr))))
    return {rows[0]: first, rows[1]: min(size[rows[1]], max(1, mr // first))}


def _block(total: int, block: int | None, tile: int) -> int:
    """A cache block: a multiple of the tile, at most the whole extent."""
    if block is None or block >= total:
        return total
    return max(tile, block // tile * tile)


def _levels(index: str, total: int, extents: list[int]) -> list[Loop | None]:
    """Loops covering `total` elements in steps of `extents` (outermost first, each a multiple of the next).
    Always len(extents) + 1 entries; one of a single full iteration is None (no loop needed), except the
    innermost, which every index keeps."""
    loops: list[Loop | None] = []
    covered = [total, *extents, 1]
    for level, (outer, inner) in enumerate(zip(covered, covered[1:], strict=False)):
        trips, tail = divmod(outer, min(inner, outer))
        innermost = level == len(covered) - 2
        loops.append(None if trips == 1 and tail == 0 and not innermost else Loop(index, trips, tail))
    return loops
