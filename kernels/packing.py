"""Operand packing: copy an input that is strided along the output's contiguous index into a layout where
that index is last, so the nest vectorizes along it with the input as a plain row (BLAS-style packing).

Two cases pack, both along the output's contiguous (last) index (a sixth, below, along NCHW's channels):
- Required: no index is contiguous or constant in every tensor (`C[m,n] += A[k,m] * B[n,k]`), so without
  packing every schedule runs scalar. The input is packed whatever the schedule.
- Chosen by the schedule: an index is contiguous everywhere already (`C[m,n] += A[m,k] * B[n,k]`: k, kept
  as vector partial sums), but the schedule's innermost loop runs over the output's contiguous index (n).
  Every input strided along it is packed (B as `B'[k,n]`), if each is reused across another output index
  (B across m: the copy is paid once per element, read m times); the nest is then an ordinary matmul (n
  vectorized, A broadcast). Tile templates choose it (kernels/tiling.py: `pack`), so the search measures
  both layouts and keeps the faster. matvec is never packed: its matrix is read once.

Three more cases are chosen by the schedule's `pack` line (kernels/schedule.py), which tile templates
write. The third packs the other operand (kernels/tiling.py: `pack`): an input constant along the
output's contiguous index
(broadcast into the register tile, A) whose last dimension is an output index (a row, m) rather than the
reduction (`A[k,m]`: A^T·B, A^T·B^T). The register tile reads it mr floats at a time at a stride of a
whole row per step of k (2 KB at 512^3: every step a new cache line, in the same few cache sets). Packed
in panels (`Panel`, as BLAS packs A: per mr rows, k x mr floats, the mr of one step of k side by side) the
tile reads one contiguous stream; the copy moves runs of mr floats, no transposing. Where the schedule's
row loops do not keep to whole panels (a hand-written schedule), A is transposed instead (`A'[m,k]`, its
largest reduction dimension moved last: read as in an ordinary matmul, one stream per row). The schedule
must say so in its `pack` line: the loop nest is the same either way.

The fourth packs B as BLIS and GotoBLAS do: an input read contiguously along the output's contiguous index
(the vectorized one, n), its last dimension, with the reduction (k) second last (`B[k,n]`; a convolution's
`W[r,s,c,f]`). Unpacked, the register tile reads one row of it per step of k, a whole row (8 KiB at 2048)
apart: every step a new cache line and a new page, in the same L1 sets, so a large matmul is bound by the
TLB and the aliasing, not by the FMAs. Packed in column panels (`Panel` with the tile's nr floats as its
width: per nr columns, k x nr floats, the nr of one step of k side by side) the tile streams one panel.
Only schedules whose loops over n keep to whole panels may pack it (Schedule.check), and tile templates
ask for it only where B is large (kernels/tiling.py `large_panels`): the copy is paid per call. The fifth
packs an input read with the reduction last and an output index second last (A[m,k] as BLIS packs A;
B[n,k]) in the same panels, copied from its rows (`Panel.transposed`). Panels of 4 KiB or more start a
cache line apart (`panel_pad`), so the panels a tile walks through do not share their L1 sets.

The sixth vectorizes another output index than the contiguous one: a convolution in NCHW
(`O[n,f,y,x] += I[n,c,y+r,x+s] * W[f,c,r,s]`) has its image row x contiguous, but x is 7 to 224 wide (a 7-wide
row fills no 16-float vector) and summed with the window (`x+s`). Its output channels f are read by W
alone, as a dimension of their own (`channel_vector`): a nest whose innermost loop runs over f packs W with
f last (`W'[c,r,s,f]`, copied as one row of c*r*s floats per channel), broadcasts the image, and gathers
and scatters the output's register tile once per tile, its lanes a channel plane apart
(kernels/codegen.py). As in the first two cases, the innermost loop tells which layout a nest runs on.
Where the nest's loops over f keep to whole register tiles (tiled schedules do), W is packed in panels of
the tile's channels instead (`channel_panel`, copied as the fifth case copies B[n,k]): the tile streams one
panel rather than reading its channels a c*r*s-float row apart at each step of (c, r, s), and the copy is
cheaper (resnet conv5's 9.4 MB on the lent Xeon: 0.5 ms, 0.93 ms as one transposed W').

The kernel copies each packed input into a buffer of its own at every call (counted in the kernel's time)
with a blocked transpose: width x width tiles (width at most COPY_WIDTH), loaded as `width` vectors along
the source's contiguous dimension, transposed in registers with shuffles and stored as `width` vectors
along the packed one, so both sides touch whole cache lines (an element-at-a-time copy in packed order
read B at a 2 KB stride at 512^3 and lost to the partial sums). In the first two cases the schedule text
does not change (it names indices, not layouts; its innermost loop tells which layout it runs on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optserve.kernels.spec import LoopNestSpec, TensorRef

SCALAR_BLOCK = 16  # tile edge of the copy where no vectors are used
# widest copy tile: 8 x 8 takes 24 shuffles, 16 x 16 takes 64 and twice the JIT time (~16 vs ~7 ms for a
# 256 x 256 copy), with the same kernel GFLOPS (A·B^T at 256^3 and 512^3 on this AVX-512 host)
COPY_WIDTH = 8
PANEL_PAD = 16  # floats (a cache line) between panels of 4 KiB or more (panel_pad)


@dataclass(frozen=True)
class PackedLayout:
    """The contraction on packed operands and, per input, the order its dimensions are copied in."""

    spec: LoopNestSpec  # inputs in their packed layouts (same indices and sizes)
    orders: tuple[tuple[int, ...] | None, tuple[int, ...] | None]  # per input: source dims in packed order


def packing_required(spec: LoopNestSpec) -> bool:
    """No index is contiguous or constant in every tensor: without packing every schedule is scalar."""
    strides = [spec.strides(t) for t in spec.tensors]
    return not any(all(s[i] in (0, 1) for s in strides) for i in spec.indices)


def channel_vector(spec: LoopNestSpec) -> str | None:
    """The output index a convolution in NCHW may vectorize instead of its output's contiguous one (the
    module docstring's sixth case): None unless that contiguous index is summed with another in an input
    (`x+s`: an image row, 7 to 224 wide, a poor fit for 16-float vectors); then the largest other output
    index (more than one element) that exactly one input reads, as a dimension of its own (the output
    channel f of `W[f,c,r,s]`): that input is packed with it last and the other is broadcast."""
    contiguous = spec.output.dims[-1][0]
    if not any(contiguous in dim and len(dim) > 1 for tensor in spec.inputs for dim in tensor.dims):
        return None
    size = spec.size_of
    candidates = []
    for index in spec.output_indices:
        readers = [t for t in spec.inputs if any(index in dim for dim in t.dims)]
        if index == contiguous or size[index] < 2 or len(readers) != 1:
            continue
        if [dim for dim in readers[0].dims if index in dim] == [(index,)]:
            candidates.append(index)
    return max(candidates, key=lambda i: size[i]) if candidates else None


def row_packable(spec: LoopNestSpec) -> tuple[str, ...]:
    """Inputs a schedule may pack along the reduction (the module docstring's third case), by name: constant
    along the output's contiguous index, last dimension an output index, a reduction index of its own
    dimension to move last. Empty where nothing can be packed so (A·B, A·B^T, matvec, convolutions)."""
    vector = spec.output.dims[-1][0]
    names = []
    for tensor in spec.inputs:
        if spec.strides(tensor)[vector] == 0 and _row_pack_order(spec, tensor) is not None:
            names.append(tensor.name)
    return tuple(names)


def column_packable(spec: LoopNestSpec) -> tuple[str, ...]:
    """Inputs a schedule may pack in column panels (the module docstring's fourth case, BLIS's packed B),
    by name: read contiguously along the output's contiguous index, which is their last dimension, with a
    reduction index of its own (more than one element) second last and single indices everywhere."""
    vector = spec.output.dims[-1][0]
    size = spec.size_of
    names = []
    for tensor in spec.inputs:
        dims = tensor.dims
        if len(dims) < 2 or any(len(dim) != 1 for dim in dims) or dims[-1] != (vector,):
            continue
        reduction = dims[-2][0]
        if reduction not in spec.output_indices and size[reduction] > 1:
            names.append(tensor.name)
    return tuple(names)


def transposed_panel_packable(spec: LoopNestSpec) -> tuple[str, ...]:
    """Inputs a schedule may pack in panels copied from rows (the module docstring's fifth case, BLIS's
    packed A), by name: single indices everywhere, the reduction (more than one element) last and an
    output index second last (A[m,k]; B[n,k], strided along the vectorized n)."""
    size = spec.size_of
    names = []
    for tensor in spec.inputs:
        dims = tensor.dims
        if len(dims) < 2 or any(len(dim) != 1 for dim in dims):
            continue
        reduction, row = dims[-1][0], dims[-2][0]
        if reduction not in spec.output_indices and size[reduction] > 1 and row in spec.output_indices:
            names.append(tensor.name)
    return tuple(names)


def panel_packable(spec: LoopNestSpec) -> tuple[str, ...]:
    """Every input a schedule's `pack` line may name: row-, column- or transposed-panel packable."""
    kinds = row_packable(spec) + column_packable(spec) + transposed_panel_packable(spec)
    return tuple(t.name for t in spec.inputs if t.name in kinds)


def panel_row(spec: LoopNestSpec, tensor: TensorRef) -> str:
    """The index a panel of `tensor` packs `width` elements of side by side: the source's last dimension,
    or its second last where the reduction is last (a transposed panel)."""
    if tensor.name in transposed_panel_packable(spec) and tensor.name not in column_packable(spec):
        return tensor.dims[-2][0]
    return tensor.dims[-1][0]


def _row_pack_order(spec: LoopNestSpec, tensor: TensorRef) -> tuple[int, ...] | None:
    """Source dimensions in packed order: the dimension of the tensor's largest reduction index moved
    last; None unless its last dimension is a single output index and such a reduction dimension exists."""
    last = tensor.dims[-1]
    if len(last) != 1 or last[0] not in spec.output_indices:
        return None
    size = spec.size_of
    reductions = [
        (size[dim[0]], -j)
        for j, dim in enumerate(tensor.dims)
        if len(dim) == 1 and dim[0] not in spec.output_indices and size[dim[0]] > 1
    ]
    if not reductions:
        return None
    moved = -max(reductions)[1]
    return tuple(j for j in range(len(tensor.dims)) if j != moved) + (moved,)


def packed_layout(
    spec: LoopNestSpec, inner: str | None = None, rows: tuple[str, ...] = ()
) -> PackedLayout | None:
    """The packed operands of a nest whose innermost loop runs over `inner` (None: the output's contiguous
    index, i.e. the layout a packing template asks for), with the inputs named in `rows` packed along the
    reduction (a schedule's `pack` line; see `row_packable`); None where nothing is packed (see the
    module docstring for when that is)."""
    vector = spec.output.dims[-1][0]
    required = packing_required(spec)
    if inner is not None and inner != vector:
        rows = ()  # the register tile broadcasts a row operand only when it vectorizes the output's index
        if inner == channel_vector(spec):
            vector = inner  # NCHW's channels: the input that reads them is packed with them last
        elif not required:
            return None
    columns = column_packable(spec)
    transposed = transposed_panel_packable(spec)
    unknown = set(rows) - set(panel_packable(spec))
    if unknown:
        raise ValueError(f"cannot pack {sorted(unknown)} along the reduction in {spec.text()}")
    output_indices = spec.output_indices
    inputs: list[TensorRef] = []
    orders: list[tuple[int, ...] | None] = []
    for tensor in spec.inputs:
        strides = spec.strides(tensor)
        in_place = tensor.name in columns or (tensor.name in transposed and strides[vector] == 0)
        if tensor.name in rows and in_place:  # panels read as the source's dimensions (A[m,k], B[k,n])
            inputs.append(TensorRef(f"{tensor.name}_packed", tensor.dims))
            orders.append(tuple(range(len(tensor.dims))))
            continue
        if tensor.name in rows and tensor.name not in transposed:
            order = _row_pack_order(spec, tensor)
            assert order is not None  # row_packable checked it
            inputs.append(TensorRef(f"{tensor.name}_packed", tuple(tensor.dims[j] for j in order)))
            orders.append(order)
            continue
        if strides[vector] in (0, 1):
            inputs.append(tensor)
            orders.append(None)
            continue
        where = [j for j, dim in enumerate(tensor.dims) if vector in dim]
        if len(where) != 1 or len(tensor.dims[where[0]]) != 1:
            return None  # the index is part of a summed dimension (p+r): no plain transpose makes it last
        reused = any(strides[i] == 0 for i in output_indices if i != vector)
        if not required and not reused and tensor.name not in rows:
            return None  # read once (matvec): the copy would cost as much as the contraction reads
        order = tuple(j for j in range(len(tensor.dims)) if j != where[0]) + (where[0],)
        inputs.append(TensorRef(f"{tensor.name}_packed", tuple(tensor.dims[j] for j in order)))
        orders.append(order)
    if orders == [None, None]:
        return None
    # a block's output and unpacked inputs keep their layout; a packed one is its own buffer (a new name)
    packed = LoopNestSpec(
        output=spec.output, inputs=(inputs[0], inputs[1]), sizes=spec.sizes, layout=spec.layout
    )
    if packing_required(packed):
        return None  # packing cannot make an index contiguous everywhere either
    return PackedLayout(packed, (orders[0], orders[1]))


@dataclass(frozen=True)
class Panel:
    """A row-packed input copied in panels, as BLAS packs A: per value of its leading (batch) dimensions,
    ceil(rows / width) panels of depth x width floats, `width` consecutive rows (the register tile's) at
    each step of the reduction, so the tile reads one contiguous stream; the last panel is zero-padded."""

    row: str  # the row index (the source's last dimension)
    reduction: str  # the reduction index (the source's second last dimension)
    width: int  # rows per panel: the register tile's
    rows: int
    depth: int
    batch: int  # product of the leading dimensions
    strides: dict[str, int]  # floats per step of each index; the row index's for whole panels only
    source_rows: int = 0  # rows of the source in memory (0: `rows`; more where it is a block's)
    # the source is [batch.., rows, depth] (a transposed panel: A[m,k], B[n,k]), not [batch.., depth, rows]
    transposed: bool = False
    source_depth: int = 0  # floats per source row of a transposed panel (its layout's last dimension)
    pad: int = 0  # floats between one panel's end and the next one's start (panel_pad)

    @property
    def padded(self) -> int:
        """Rows with the last panel's padding."""
        return -(-self.rows // self.width) * self.width

    @property
    def panel_floats(self) -> int:
        """Floats from one panel's start to the next one's."""
        return self.width * self.depth + self.pad

    @property
    def batch_floats(self) -> int:
        """Floats of the panels of one value of the leading dimensions."""
        return self.padded // self.width * self.panel_floats

    @property
    def size(self) -> int:
        """Floats in the buffer."""
        return self.batch * self.batch_floats

    def offset(self, index: str, amount: int) -> int:
        """Floats between two elements `amount` apart along `index`: a move of the row index is either a
        whole number of panels or stays inside one (the tiled schedule's row loops guarantee it)."""
        if index == self.row and amount % self.width == 0:
            return amount // self.width * self.panel_floats
        if index != self.row:
            return amount * self.strides[index]
        if not 0 < amount < self.width:
            raise ValueError(f"a move of {amount} rows crosses a panel of {self.width}")
        return amount


def panel_of(spec: LoopNestSpec, tensor: TensorRef, width: int) -> Panel | None:
    """The panel layout of a row-packable input for register tiles of `width` rows, or of a
    column-packable one for register tiles `width` floats wide; None unless its last two dimensions are
    (reduction, row) and every dimension is a single index (a row-packable one is transposed then)."""
    if len(tensor.dims) < 2 or any(len(dim) != 1 for dim in tensor.dims) or width < 1:
        return None
    transposed = panel_row(spec, tensor) != tensor.dims[-1][0]
    if tensor.name not in column_packable(spec) and not transposed:
        order = _row_pack_order(spec, tensor)
        if order is None or order[-1] != len(tensor.dims) - 2:
            return None
    shape = spec.shape(tensor)
    if transposed:
        row, reduction = tensor.dims[-2][0], tensor.dims[-1][0]
        rows, depth = shape[-2], shape[-1]
    else:
        row, reduction = tensor.dims[-1][0], tensor.dims[-2][0]
        rows, depth = shape[-1], shape[-2]
    strides = dict.fromkeys(spec.indices, 0)
    pad = panel_pad(width, depth)
    step = -(-rows // width) * (width * depth + pad)
    for dim, extent in zip(reversed(tensor.dims[:-2]), reversed(shape[:-2]), strict=True):
        strides[dim[0]] = step
        step *= extent
    strides[row], strides[reduction] = depth, width  # the row's: within a panel, see Panel.offset
    layout = spec.layout_shape(tensor)
    batch = math.prod(shape[:-2])
    if transposed:
        return Panel(row, reduction, width, rows, depth, batch, strides, layout[-2], True, layout[-1], pad)
    return Panel(row, reduction, width, rows, depth, batch, strides, layout[-1], pad=pad)


def channel_panel(spec: LoopNestSpec, width: int) -> Panel | None:
    """The panel layout of the weights of an NCHW convolution whose register tile vectorizes `width` of its
    output channels (`channel_vector`; the module docstring's sixth case): per `width` channels, the c*r*s
    floats of each channel's row side by side at every step of (c, r, s), so the tile streams one panel
    instead of reading `width` floats a c*r*s-float row apart, and the copy is a transposed panel's
    (8 x 8 tiles transposed in registers, one store per tile row). None unless the channel is the input's
    first dimension and every other dimension is a single reduction index."""
    channel = channel_vector(spec)
    if channel is None or width < 1:
        return None
    readers = [t for t in spec.inputs if (channel,) in t.dims]
    tensor = readers[0]
    rest = tensor.dims[1:]
    if tensor.dims[0] != (channel,) or not rest or any(len(dim) != 1 for dim in rest):
        return None
    if any(dim[0] in spec.output_indices for dim in rest):
        return None
    shape, layout = spec.shape(tensor), spec.layout_shape(tensor)
    depth = math.prod(shape[1:])
    if math.prod(layout[1:]) != depth:
        return None  # a block of the reduction: its rows are not whole (no parallel cut makes one)
    strides = dict.fromkeys(spec.indices, 0)
    step = width
    for dim, extent in zip(reversed(rest), reversed(shape[1:]), strict=True):
        strides[dim[0]] = step
        step *= extent
    strides[channel] = depth  # within a panel, see Panel.offset
    pad = panel_pad(width, depth)
    return Panel(channel, rest[-1][0], width, shape[0], depth, 1, strides, layout[0], True, depth, pad)


def panel_pad(width: int, depth: int) -> int:
    """Floats left free after each panel: a cache line where a panel is 4 KiB or more, so the panels a
    register tile walks through (one per tile, a whole panel apart: 128 KiB for 16 x 2048) do not all
    start in the same L1 sets (with every panel a multiple of 4 KiB they would, as unpacked rows do)."""
    return PANEL_PAD if width * depth >= 1024 else 0


def panel_function_ir(name: str, panel: Panel, block: int = 16) -> str:
    """IR of `name(src, dst)`: dst = src (row-major [batch.., depth, rows]) in `panel`'s layout. Copied in
    blocks of `block` reduction steps, panel after panel inside a block: the block's source rows stay in
    the L1 cache while every panel takes its part, and each panel's part is written as one stream."""
    if panel.transposed:
        return _transposed_panel_function_ir(name, panel)
    out = _Writer()
    full, last = divmod(panel.rows, panel.width)
    panel_floats = panel.panel_floats
    source_rows = panel.source_rows or panel.rows

    def copy(src: str, dst: str, count: int) -> None:
        """`count` consecutive floats, in vectors of 8, 4, 2 and single floats."""
        done = 0
        for width in (8, 4, 2, 1):
            while count - done >= width:
                ty = "float" if width == 1 else f"<{width} x float>"
                at = out.op(f"getelementptr inbounds float, ptr %src, i64 {out.offset(src, str(done), 1)}")
                value = out.op(f"load {ty}, ptr {at}, align 4")
                at = out.op(f"getelementptr inbounds float, ptr %dst, i64 {out.offset(dst, str(done), 1)}")
                out.lines.append(f"  store {ty} {value}, ptr {at}, align 4")
                done += width

    def steps(src: str, dst: str, count: int, trips: int) -> None:
        """`trips` reduction steps of one panel of `count` rows."""
        out.loop(
            trips, lambda k: copy(out.offset(src, k, source_rows), out.offset(dst, k, panel.width), count)
        )

    def panels(src: str, dst: str, trips: int) -> None:
        """`trips` reduction steps of every panel, the padded last one included."""
        out.loop(
            full,
            lambda q: steps(
                out.offset(src, q, panel.width), out.offset(dst, q, panel_floats), panel.width, trips
            ),
        )
        if last:
            at_src, at_dst = str(full * panel.width), str(full * panel_floats)
            steps(out.offset(src, at_src, 1), out.offset(dst, at_dst, 1), last, trips)

    def batch(b: str) -> None:
        src, dst = (
            out.offset("0", b, panel.depth * source_rows),
            out.offset("0", b, panel.batch_floats),
        )
        blocks, rest = divmod(panel.depth, block)
        src_block, dst_block = block * source_rows, block * panel.width
        out.loop(
            blocks, lambda kb: panels(out.offset(src, kb, src_block), out.offset(dst, kb, dst_block), block)
        )
        if rest:
            at_src, at_dst = str(blocks * src_block), str(blocks * dst_block)
            panels(out.offset(src, at_src, 1), out.offset(dst, at_dst, 1), rest)

    out.loop(panel.batch, batch)
    return _copy_function(name, out.lines)


def _transposed_panel_function_ir(name: str, panel: Panel) -> str:
    """IR of `name(src, dst)` for a transposed panel: src row-major [batch.., rows, depth] (rows of
    `source_depth` floats, `source_rows` of them per batch), dst in `panel`'s layout. Copied in
    COPY_WIDTH x COPY_WIDTH tiles (COPY_WIDTH rows' vectors along the depth, transposed in registers,
    stored as vectors of COPY_WIDTH rows at each step of the reduction), every row group of a panel at
    one block of steps before the next block; rows and steps left over one by one."""
    out = _Writer()
    edge = COPY_WIDTH
    vty = f"<{edge} x float>"
    full, last = divmod(panel.rows, panel.width)
    panel_floats = panel.panel_floats
    row_stride = panel.source_depth or panel.depth
    batch_stride = row_stride * (panel.source_rows or panel.rows)
    k_tiles, k_rest = divmod(panel.depth, edge)

    def scalar(src: str, dst: str, rows: int, k_start: int, steps: int) -> None:
        """rows x steps floats one at a time, from step k_start on."""

        def row(r: str) -> None:
            def element(k: str) -> None:
                at_src = out.offset(out.offset(src, r, row_stride), k, 1)
                at = out.op(
                    f"getelementptr inbounds float, ptr %src, i64 {out.offset(at_src, str(k_start), 1)}"
                )
                value = out.op(f"load float, ptr {at}, align 4")
                at_dst = out.offset(out.offset(dst, r, 1), k, panel.width)
                to_dst = out.offset(at_dst, str(k_start), panel.width)
                to = out.op(f"getelementptr inbounds float, ptr %dst, i64 {to_dst}")
                out.lines.append(f"  store float {value}, ptr {to}, align 4")

            out.loop(steps, element)

        out.loop(rows, row)

    def tile(src: str, dst: str) -> None:
        values = []
        for r in range(edge):
            at = out.op(f"getelementptr inbounds float, ptr %src, i64 {out.offset(src, str(r), row_stride)}")
            values.append(out.op(f"load {vty}, ptr {at}, align 4"))
        for h, low, high in transpose_masks(edge):
            for i in (i for i in range(edge) if i & h == 0):
                a, b = values[i], values[i + h]
                for target, mask in ((i, low), (i + h, high)):
                    text = ", ".join(f"i32 {m}" for m in mask)
                    values[target] = out.op(f"shufflevector {vty} {a}, {vty} {b}, <{edge} x i32> <{text}>")
        for k in range(edge):  # values[k]: step k of the tile's rows, side by side
            at = out.op(f"getelementptr inbounds float, ptr %dst, i64 {out.offset(dst, str(k), panel.width)}")
            out.lines.append(f"  store {vty} {values[k]}, ptr {at}, align 4")

    def groups_at(src: str, dst: str, groups: int) -> None:
        """One tile of every row group at these steps: the panel's rows of them written whole."""
        out.loop(groups, lambda g: tile(out.offset(src, g, edge * row_stride), out.offset(dst, g, edge)))

    def rows_of(src: str, dst: str, count: int) -> None:
        groups, rest = divmod(count, edge)
        if groups:
            # steps outermost, the row groups inside: each step's row of the panel (width floats) is written
            # whole at once, where group after group over the whole depth wrote each cache line in halves
            # half a panel apart (both halves read and written back again). Lent Xeon, 1 thread, the 6x4
            # tile's B' (64-wide panels): A.B^T 2048^3 2.5-2.9 -> 2.1 ms, A^T.B^T 2048^3 2.8-2.9 -> 1.7 ms,
            # 1000^3 0.52-0.63 -> 0.31-0.44 ms (B[k,n]'s untransposed panels: 1.3-1.7 and 0.3 ms)
            out.loop(
                k_tiles,
                lambda kb: groups_at(
                    out.offset(src, kb, edge), out.offset(dst, kb, edge * panel.width), groups
                ),
            )
            if k_rest:
                out.loop(
                    groups,
                    lambda g: scalar(
                        out.offset(src, g, edge * row_stride),
                        out.offset(dst, g, edge),
                        edge,
                        k_tiles * edge,
                        k_rest,
                    ),
                )
        if rest:
            at_src = out.offset(src, str(groups * edge), row_stride)
            scalar(at_src, out.offset(dst, str(groups * edge), 1), rest, 0, panel.depth)

    def batch(b: str) -> None:
        src, dst = out.offset("0", b, batch_stride), out.offset("0", b, panel.batch_floats)
        out.loop(
            full,
            lambda q: rows_of(
                out.offset(src, q, panel.width * row_stride), out.offset(dst, q, panel_floats), panel.width
            ),
        )
        if last:
            start_src, start_dst = str(full * panel.width * row_stride), str(full * panel_floats)
            rows_of(out.offset(src, start_src, 1), out.offset(dst, start_dst, 1), last)

    out.loop(panel.batch, batch)
    return _copy_function(name, out.lines)


def packed_reuse(spec: LoopNestSpec) -> int | None:
    """How many times the nest reads each element packed by choice (the least over those inputs: the
    product of the output indices the input does not use; A·B^T: m, A^T·B: n); None where packing is no
    choice (nothing may be packed, or only what is required)."""
    rows = row_packable(spec)
    chosen = packed_layout(spec, rows=rows)
    forced = packed_layout(spec) if packing_required(spec) else None
    if chosen is None:
        return None
    optional = [
        tensor
        for tensor, order, before in zip(
            spec.inputs, chosen.orders, forced.orders if forced else (None, None), strict=True
        )
        if order is not None and order != before
    ]
    if not optional:
        return None
    size = spec.size_of
    return min(
        math.prod(size[i] for i in spec.output_indices if spec.strides(tensor)[i] == 0) for tensor in optional
    )


class _Writer:
    """IR text of one function: SSA names, blocks and counted loops (at least one trip each)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0
        self.block = "entry"

    def op(self, text: str, prefix: str = "v") -> str:
        self.counter += 1
        value = f"%{prefix}{self.counter}"
        self.lines.append(f"  {value} = {text}")
        return value

    def offset(self, base: str, counter: str, stride: int) -> str:
        """base + counter * stride (an i64 value or constant)."""
        if stride == 0 or counter == "0":
            return base
        if counter.isdigit():  # a constant: fold it
            if base == "0" or base.isdigit():
                return str(int(base) + int(counter) * stride)
            return self.op(f"add nuw nsw i64 {base}, {int(counter) * stride}")
        term = counter if stride == 1 else self.op(f"mul nuw nsw i64 {counter}, {stride}")
        return term if base == "0" else self.op(f"add nuw nsw i64 {base}, {term}")

    def loop(self, trips: int, body) -> None:
        """`for counter in range(trips): body(counter)`; no code for 0 trips, no loop for 1."""
        if trips <= 1:
            if trips == 1:
                body("0")
            return
        self.counter += 1
        head, done, counter = f"loop{self.counter}", f"done{self.counter}", f"%i{self.counter}"
        pre = self.block
        self.lines += [f"  br label %{head}", f"{head}:"]
        self.block = head
        phi_at = len(self.lines)
        body(counter)
        following = self.op(f"add nuw nsw i64 {counter}, 1")
        more = self.op(f"icmp ult i64 {following}, {trips}")
        self.lines.insert(phi_at, f"  {counter} = phi i64 [ 0, %{pre} ], [ {following}, %{self.block} ]")
        self.lines += [f"  br i1 {more}, label %{head}, label %{done}", f"{done}:"]
        self.block = done


def transpose_masks(width: int) -> list[tuple[int, list[int], list[int]]]:
    """Per stage h (1, 2, 4, ..): the shuffle masks that swap the h-bit of row and column in every pair of
    rows (i, i + h): after all log2(width) stages, row r holds what column r held."""
    stages = []
    h = 1
    while h < width:
        low = [j if j & h == 0 else width + j - h for j in range(width)]
        high = [j + h if j & h == 0 else width + j for j in range(width)]
        stages.append((h, low, high))
        h *= 2
    return stages


def pack_function_ir(
    name: str,
    shape: tuple[int, ...],
    order: tuple[int, ...],
    width: int = 1,
    source_shape: tuple[int, ...] | None = None,
) -> str:
    """IR of `name(src, dst)`: dst (dimensions in `order`, one dimension moved last) = src (row-major
    `shape`, laid out in memory as `source_shape` if given: a block of a larger tensor), copied in
    width x width tiles (vectors of `width` floats; 1: scalar tiles of SCALAR_BLOCK)."""
    moved = order[-1]
    if order != tuple(j for j in range(len(shape)) if j != moved) + (moved,) or moved == len(shape) - 1:
        raise ValueError(f"order {order} does not move one dimension before the last to the end")
    laid_out = source_shape or shape
    if moved < len(shape) - 2 and tuple(laid_out[moved + 1 :]) == tuple(shape[moved + 1 :]):
        # the dimensions after the moved one are whole and stay in order (W[f,c,r,s] -> W'[c,r,s,f]): one
        # row of c*r*s floats, so the copy moves width x width tiles, not rows of s (3) floats
        rest = math.prod(shape[moved + 1 :])
        shape, laid_out = (*shape[: moved + 1], rest), (*laid_out[: moved + 1], rest)
        order = (*range(moved), moved + 1, moved)
    last = len(shape) - 1  # the source's contiguous dimension: the packed layout's second last
    src_strides = [math.prod(laid_out[j + 1 :]) for j in range(len(shape))]
    dst_shape = [shape[j] for j in order]
    dst_strides = {j: math.prod(dst_shape[p + 1 :]) for p, j in enumerate(order)}
    rows, cols = shape[moved], shape[last]  # tile: `rows` of the moved dimension x `cols` of the last
    row_src = src_strides[moved]  # source stride of the moved dimension; its packed stride is 1
    col_dst = dst_strides[last]  # packed stride of the source's contiguous dimension (= rows)
    edge = width if width > 1 else SCALAR_BLOCK
    out = _Writer()
    vty = f"<{width} x float>"

    def vector_tile(src: str, dst: str) -> None:
        values = []
        for r in range(width):
            at = out.op(f"getelementptr inbounds float, ptr %src, i64 {out.offset(src, str(r), row_src)}")
            values.append(out.op(f"load {vty}, ptr {at}, align 4"))
        for h, low, high in transpose_masks(width):
            for i in (i for i in range(width) if i & h == 0):
                a, b = values[i], values[i + h]
                for target, mask in ((i, low), (i + h, high)):
                    text = ", ".join(f"i32 {m}" for m in mask)
                    values[target] = out.op(f"shufflevector {vty} {a}, {vty} {b}, <{width} x i32> <{text}>")
        for c in range(width):
            at = out.op(f"getelementptr inbounds float, ptr %dst, i64 {out.offset(dst, str(c), col_dst)}")
            out.lines.append(f"  store {vty} {values[c]}, ptr {at}, align 4")

    def scalar_tile(src: str, dst: str, n_cols: int, n_rows: int) -> None:
        def column(c: str) -> None:
            src_c, dst_c = out.offset(src, c, 1), out.offset(dst, c, col_dst)

            def element(r: str) -> None:
                at = out.op(f"getelementptr inbounds float, ptr %src, i64 {out.offset(src_c, r, row_src)}")
                value = out.op(f"load float, ptr {at}, align 4")
                to = out.op(f"getelementptr inbounds float, ptr %dst, i64 {out.offset(dst_c, r, 1)}")
                out.lines.append(f"  store float {value}, ptr {to}, align 4")

            out.loop(n_rows, element)  # innermost along the packed layout's contiguous dimension

        out.loop(n_cols, column)

    def tiles(src: str, dst: str) -> None:
        full_cols, tail_cols = divmod(cols, edge)
        full_rows, tail_rows = divmod(rows, edge)

        def tile_column(n_cols: int, src_c: str, dst_c: str) -> None:
            def full_tile(rb: str) -> None:
                src_t, dst_t = out.offset(src_c, rb, edge * row_src), out.offset(dst_c, rb, edge)
                if width > 1 and n_cols == edge:
                    vector_tile(src_t, dst_t)
                else:
                    scalar_tile(src_t, dst_t, n_cols, edge)

            out.loop(full_rows, full_tile)
            if tail_rows:
                src_t = out.offset(src_c, str(full_rows * edge), row_src)
                dst_t = out.offset(dst_c, str(full_rows * edge), 1)
                scalar_tile(src_t, dst_t, n_cols, tail_rows)

        out.loop(
            full_cols,
            lambda cb: tile_column(edge, out.offset(src, cb, edge), out.offset(dst, cb, edge * col_dst)),
        )
        if tail_cols:
            start = str(full_cols * edge)
            tile_column(tail_cols, out.offset(src, start, 1), out.offset(dst, start, col_dst))

    def outer(level: int, src: str, dst: str) -> None:
        if level == len(order) - 2:
            tiles(src, dst)
            return
        j = order[level]
        out.loop(
            shape[j],
            lambda i: outer(
                level + 1, out.offset(src, i, src_strides[j]), out.offset(dst, i, dst_strides[j])
            ),
        )

    outer(0, "0", "0")
    return _copy_function(name, out.lines)


def _copy_function(name: str, body: list[str]) -> str:
    """A packing copy as an internal function of (src, dst)."""
    header = (
        f"define internal void @{name}(ptr noalias nocapture readonly %src, ptr noalias nocapture %dst) {{"
    )
    return "\n".join([header, "entry:", *body, "  ret void", "}"])
