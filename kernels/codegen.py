"""Schedule -> LLVM IR, following LoopNest's rules (thesis §3.4).

- The innermost loop is vectorized when every tensor is contiguous (stride 1) or constant (stride 0) along
  it; otherwise it runs scalar (no gathers). An output that is constant along it (a reduction innermost)
  is kept as vector partial sums, reduced once when its register tile is written back. An NCHW
  convolution's output channels (packing.channel_vector) are vectorized too, though the output is strided
  along them: its register tile is gathered when it opens and scattered when it closes.
- Register tile: the outermost loop whose body touches few enough output vectors to stay in registers
  opens a tile. Inside it, loops over output indices are unrolled, loops over reduction indices stay loops
  (short ones with only straight-line code below are unrolled), and accumulators are SSA values carried
  around loops by phis: they are loaded once when the tile opens and stored once when it closes, and never
  spill by construction.
- Loops run in exactly the scheduled order; tails are generated as separate code, because every size is a
  compile-time constant. One exception keeps code size (and JIT time, which grows with it) down: a block
  loop's tail that is the block with fewer trips in inner loops over the same index is one more trip of
  the block loop, whose inner loops then run the tail's trip counts.

The generator first builds a small plan (loops, shifts, tiles, multiply-adds), then writes IR text from it
directly (much faster than building llvmlite.ir objects). The plan is also what bounds code size: a tile is
opened only where its unrolled body is small enough.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optserve.kernels.packing import (
    COPY_WIDTH,
    PackedLayout,
    Panel,
    channel_panel,
    channel_vector,
    pack_function_ir,
    packed_layout,
    panel_function_ir,
    panel_of,
    panel_row,
)
from optserve.kernels.schedule import Schedule, covered_extents, iteration_extents, whole_panels
from optserve.kernels.spec import LoopNestSpec, SpecError

KERNEL_NAME = "kernel"
# kernel_ws(out, in0, in1, ws0, ws1): the kernel packing into the caller's buffers (`workspace_floats` each)
# instead of its module's own, so threads can run it at once (kernels/parallel.py)
WORKSPACE_KERNEL_NAME = "kernel_ws"
# the scheduled nest on packed operands (kernel(out, in0, in1) itself where nothing is packed) and, per
# input, pack_inN(src, dst): the copy into a buffer; a parallel kernel packs an input once for all the
# blocks that read the same part of it, then runs the blocks' nests (kernels/parallel.py)
PACKED_NEST_NAME = "kernel_packed"
PACK_NAMES = ("pack_in0", "pack_in1")
UNROLL_TRIPS = 4  # reduction loops this short are unrolled inside a register tile
BENCH_NAME = "bench"


@dataclass(frozen=True)
class Target:
    """What the generator needs to know about the CPU."""

    vector_widths: tuple[int, ...] = (8,)  # float lanes, widest first (AVX2: 8; AVX-512: 16, 8)
    accumulator_registers: int = 12  # vector registers an output tile may occupy (16 ymm minus operands)
    max_statements: int = 256  # most multiply-adds unrolled inside one tile
    max_total_statements: int = 8192  # most multiply-adds in the whole kernel (bounds compile time)


# The plan: a tree of these nodes.
@dataclass(frozen=True)
class MulAdd:
    width: int


@dataclass(frozen=True)
class Shift:
    index: str
    amount: int
    body: object


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class RuntimeLoop:
    index: str
    trips: int
    step: int
    body: object
    # trips in the last iteration of the enclosing loop over the same index (its tail block), if fewer
    last_trips: int | None = None


@dataclass(frozen=True)
class Tile:
    body: object


class _Planner:
    def __init__(self, spec: LoopNestSpec, schedule: Schedule, target: Target):
        self.loops = schedule.compute
        self.extents = iteration_extents(self.loops)
        self.target = target
        self.output_indices = set(spec.output_indices)
        self.out_strides = spec.strides(spec.output)
        inner = self.loops[-1].index
        strides = [spec.strides(t)[inner] for t in spec.tensors]
        # NCHW's channels (packing.channel_vector): the output is strided along them, its tile gathered
        # when the tile opens and scattered when it closes; every other nest needs the output contiguous
        gathered = inner == channel_vector(spec)
        self.vectorized = all(s in (0, 1) for s in strides[1:]) and (strides[0] in (0, 1) or gathered)
        self.widths = target.vector_widths if self.vectorized else ()
        self.partial_sums = self.vectorized and self.out_strides[inner] == 0
        self.strided = self.out_strides[inner] if self.vectorized and strides[0] not in (0, 1) else 0
        # per loop: whether a deeper reduction loop stays a runtime loop inside a tile
        reductions = [lp.index not in self.output_indices and lp.size > UNROLL_TRIPS for lp in self.loops]
        self.runtime_below = [any(reductions[p + 1 : -1]) for p in range(len(self.loops))]

    def chunks(self, extent: int) -> list[tuple[int, int]]:
        """(offset, width) pieces of the innermost loop: widest vectors first, scalars last."""
        pieces, offset = [], 0
        for width in self.widths:
            while extent - offset >= width:
                pieces.append((offset, width))
                offset += width
        pieces.extend((o, 1) for o in range(offset, extent))
        return pieces

    def plan(self) -> object:
        return self._build(0, covered_extents(self.loops), tiled=False)

    def _count(self, pos: int, avail: dict[str, int]) -> int:
        """Multiply-adds emitted for loops pos.. inside a tile (output loops unrolled)."""
        loop = self.loops[pos]
        extent = avail[loop.index]
        if pos == len(self.loops) - 1:
            return len(self.chunks(extent))
        full, rem = divmod(extent, self.extents[pos])
        body = self._count(pos + 1, {**avail, loop.index: self.extents[pos]}) if full else 0
        tail = self._count(pos + 1, {**avail, loop.index: rem}) if rem else 0
        if self._unrolled_in_tile(pos, full):
            return full * body + tail
        return body + tail

    def _unrolled_in_tile(self, pos: int, trips: int) -> bool:
        """Inside a tile, output loops are unrolled (each element its own register), and so are short
        reduction loops with only straight-line code below: unrolling one around a runtime loop would only
        copy that loop (a 3x3 convolution window around its channel loop: 9 copies, no gain)."""
        if self.loops[pos].index in self.output_indices:
            return True
        return trips <= UNROLL_TRIPS and not self.runtime_below[pos]

    def _build(self, pos: int, avail: dict[str, int], tiled: bool) -> object:
        loop = self.loops[pos]
        innermost = pos == len(self.loops) - 1
        if not tiled and self._count(pos, avail) <= self.target.max_statements:
            body = self._build(pos, avail, tiled=True)
            if len(self.accumulators_at(body, 0)) <= self.target.accumulator_registers:
                return Tile(body)
        extent = avail[loop.index]
        if innermost:
            if tiled:
                return Seq(tuple(Shift(loop.index, o, MulAdd(w)) for o, w in self.chunks(extent)))
            # Too wide for registers: a loop over widest vectors, each its own one-register tile.
            width = self.widths[0] if self.widths else 1
            trips = extent // width
            items = []
            if trips:
                items.append(RuntimeLoop(loop.index, trips, width, Tile(MulAdd(width))))
            rest = self.chunks(extent - trips * width)
            items.extend(Shift(loop.index, trips * width + o, Tile(MulAdd(w))) for o, w in rest)
            return Seq(tuple(items))
        step = self.extents[pos]
        full, rem = divmod(extent, step)
        items = []
        body = self._build(pos + 1, {**avail, loop.index: step}, tiled) if full else None
        tail = self._build(pos + 1, {**avail, loop.index: rem}, tiled) if rem else None
        unrolled = tiled and self._unrolled_in_tile(pos, full)
        if body is not None and tail is not None and not unrolled:
            # The tail block is often the full block with shorter inner loops over the same index (a cache
            # block of 64 with a tail of 44): one more iteration whose inner loops run fewer trips, instead
            # of a second copy of the code (half the IR, half the JIT time).
            folded = _with_last_trips(body, tail, loop.index)
            if folded is not None:
                return RuntimeLoop(loop.index, full + 1, step, folded)
        if body is not None:
            if unrolled:
                items.extend(Shift(loop.index, j * step, body) for j in range(full))
            elif full == 1:
                items.append(body)
            else:
                items.append(RuntimeLoop(loop.index, full, step, body))
        if tail is not None:
            items.append(Shift(loop.index, full * step, tail))
        return Seq(tuple(items))

    def accumulators_at(self, node: object, offset: int) -> set[tuple[str, int, int]]:
        """Register slots (kind, output offset, width) a tile body needs, starting at output `offset`."""
        slots: set[tuple[str, int, int]] = set()
        self._collect(node, offset, slots)
        return slots

    def _collect(self, node: object, offset: int, slots: set) -> None:
        if isinstance(node, MulAdd):
            slots.add(self.slot(offset, node.width))
        elif isinstance(node, Shift):
            self._collect(node.body, offset + node.amount * self.out_strides[node.index], slots)
        elif isinstance(node, Seq):
            for item in node.items:
                self._collect(item, offset, slots)
        elif isinstance(node, RuntimeLoop | Tile):
            self._collect(node.body, offset, slots)

    def slot(self, offset: int, width: int) -> tuple[str, int, int]:
        if width == 1:
            return ("scalar", offset, 1)
        if self.strided:
            return ("strided", offset, width)
        return ("partial" if self.partial_sums else "vector", offset, width)


def _with_last_trips(body: object, tail: object, index: str) -> object | None:
    """`body` with the trips of the tail block marked on its runtime loops over `index`, when `tail` is
    `body` with only those trip counts smaller; else None."""
    if type(body) is not type(tail):
        return None
    if isinstance(body, MulAdd):
        return body if body == tail else None
    if isinstance(body, Seq):
        if len(body.items) != len(tail.items):
            return None
        items = [_with_last_trips(a, b, index) for a, b in zip(body.items, tail.items, strict=True)]
        return None if any(item is None for item in items) else Seq(tuple(items))
    if isinstance(body, Shift):
        if (body.index, body.amount) != (tail.index, tail.amount):
            return None
        inner = _with_last_trips(body.body, tail.body, index)
        return None if inner is None else Shift(body.index, body.amount, inner)
    if isinstance(body, Tile):
        inner = _with_last_trips(body.body, tail.body, index)
        return None if inner is None else Tile(inner)
    if isinstance(body, RuntimeLoop):
        same = (body.index, body.step, body.last_trips) == (tail.index, tail.step, tail.last_trips)
        if not same or (body.trips != tail.trips and (body.index != index or body.last_trips is not None)):
            return None
        inner = _with_last_trips(body.body, tail.body, index)
        if inner is None:
            return None
        last = tail.trips if tail.trips != body.trips else body.last_trips
        return RuntimeLoop(body.index, body.trips, body.step, inner, last)
    raise TypeError(body)  # pragma: no cover - the planner makes only the nodes above


def emitted_statements(node: object, memo: dict | None = None) -> int:
    """Multiply-adds the IR of a plan will contain (copies of shared sub-plans counted each time)."""
    memo = {} if memo is None else memo
    if id(node) not in memo:
        if isinstance(node, MulAdd):
            memo[id(node)] = 1
        elif isinstance(node, Seq):
            memo[id(node)] = sum(emitted_statements(item, memo) for item in node.items)
        else:
            memo[id(node)] = emitted_statements(node.body, memo)  # type: ignore[attr-defined]
    return memo[id(node)]


def check_code_size(spec: LoopNestSpec, schedule: Schedule, target: Target) -> None:
    """Raise SpecError where `generate_ir` would (more straight-line code than the target takes), without
    writing or compiling the IR."""
    layout = packed_layout(spec, schedule.compute[-1].index, schedule.pack)
    _checked_plan(_Planner(layout.spec if layout else spec, schedule, target), target)


def _checked_plan(planner: _Planner, target: Target) -> object:
    plan = planner.plan()
    statements = emitted_statements(plan)
    if statements > target.max_total_statements:
        raise SpecError(
            f"schedule needs {statements} multiply-adds of straight-line code (tails of tails),"
            f" limit {target.max_total_statements}"
        )
    return plan


def plan_schedule(spec: LoopNestSpec, schedule: Schedule, target: Target) -> tuple[object, bool]:
    """The plan of a schedule and whether its innermost loop is vectorized (on packed operands, if any)."""
    layout = packed_layout(spec, schedule.compute[-1].index, schedule.pack)
    planner = _Planner(layout.spec if layout else spec, schedule, target)
    return planner.plan(), planner.vectorized


class _Emitter:
    """Lowers a plan to LLVM IR text. Accumulators are SSA values (phis across runtime loops), so the IR
    needs no clean-up passes; addresses are one getelementptr from a per-loop base pointer."""

    def __init__(
        self,
        spec: LoopNestSpec,
        schedule: Schedule,
        target: Target,
        panels: tuple[Panel | None, Panel | None] = (None, None),
    ):
        self.planner = _Planner(spec, schedule, target)
        self.strides = [spec.strides(t) for t in spec.tensors]  # output, input 0, input 1
        self.panels: list[Panel | None] = [None, *panels]  # inputs in panels: their own addressing
        for t, panel in enumerate(self.panels):
            if panel is not None:
                self.strides[t] = panel.strides
        self.inner = schedule.compute[-1].index
        self.lines: list[str] = []
        self.counter = 0
        self.block = "entry"
        self.pointers = ["%out", "%in0", "%in1"]
        self.offsets: list[str | None] = [None, None, None]  # runtime element offset of each pointer
        self.enclosing: dict[str, tuple[str, str]] = {}  # index -> (counter, trips) of its innermost loop
        self.consts = [0, 0, 0]
        self.tile: dict | None = None
        self.loads: dict = {}
        self.fma_widths: set[int] = set()
        self.reduce_widths: set[int] = set()
        self.gather_widths: set[int] = set()

    def name(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"%{prefix}{self.counter}"

    def op(self, text: str, prefix: str = "t") -> str:
        value = self.name(prefix)
        self.lines.append(f"  {value} = {text}")
        return value

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label
        self.loads = {}  # loads are reused only inside one block

    def emit(self, plan: object) -> str:
        self.lines.append("entry:")
        self._emit(plan)
        self.lines.append("  ret void")
        return "\n".join(self.lines)

    def _emit(self, node: object) -> None:
        if isinstance(node, Seq):
            for item in node.items:
                self._emit(item)
        elif isinstance(node, Shift):
            saved = list(self.consts)
            for t in range(len(self.strides)):
                self.consts[t] += self._moved(t, node.index, node.amount)
            self._emit(node.body)
            self.consts = saved
        elif isinstance(node, RuntimeLoop):
            self._emit_loop(node)
        elif isinstance(node, Tile):
            self._emit_tile(node)
        elif isinstance(node, MulAdd):
            self._emit_muladd(node.width)
        else:  # pragma: no cover - the planner makes only the nodes above
            raise TypeError(node)

    def _emit_loop(self, node: RuntimeLoop) -> None:
        self.counter += 1
        head, done = f"loop.{node.index}{self.counter}", f"done.{node.index}{self.counter}"
        bound = str(node.trips)
        if node.last_trips is not None:  # fewer trips in the enclosing loop's tail block
            outer_counter, outer_bound = self.enclosing[node.index]
            outer_next = self.op(f"add nuw nsw i64 {outer_counter}, 1")
            last = self.op(f"icmp eq i64 {outer_next}, {outer_bound}")
            bound = self.op(f"select i1 {last}, i64 {node.last_trips}, i64 {node.trips}")
        pre = self.block
        self.lines.append(f"  br label %{head}")
        self.start_block(head)
        phi_at = len(self.lines)
        counter = self.name("i")
        saved = (list(self.pointers), list(self.offsets), dict(self.enclosing))
        self.enclosing[node.index] = (counter, bound)
        for t in range(len(self.strides)):
            stride = self._moved(t, node.index, node.step)
            if stride:
                moved = counter if stride == 1 else self.op(f"mul nuw nsw i64 {counter}, {stride}")
                if self.offsets[t] is not None:
                    moved = self.op(f"add nuw nsw i64 {self.offsets[t]}, {moved}")
                self.offsets[t] = moved
                arg = ("%out", "%in0", "%in1")[t]
                self.pointers[t] = self.op(f"getelementptr inbounds float, ptr {arg}, i64 {moved}", "p")
        carried = {}
        if self.tile is not None:  # accumulators this loop updates travel around it as phis
            offset = self.consts[0] - self.tile["const"]
            for key in sorted(self.planner.accumulators_at(node.body, offset)):
                carried[key] = (self.tile["acc"][key], self.name("acc"))
                self.tile["acc"][key] = carried[key][1]
        self._emit(node.body)
        nxt = self.op(f"add nuw nsw i64 {counter}, 1")
        more = self.op(f"icmp ult i64 {nxt}, {bound}")
        latch = self.block
        self.lines.append(f"  br i1 {more}, label %{head}, label %{done}")
        phis = [f"  {counter} = phi i64 [ 0, %{pre} ], [ {nxt}, %{latch} ]"]
        for key, (before, phi) in carried.items():
            phis.append(
                f"  {phi} = phi {_type(key[2])} [ {before}, %{pre} ], [ {self.tile['acc'][key]}, %{latch} ]"
            )
        self.lines[phi_at:phi_at] = phis
        self.start_block(done)
        self.pointers, self.offsets, self.enclosing = saved

    def _moved(self, t: int, index: str, amount: int) -> int:
        """Floats between elements of tensor t `amount` apart along `index`."""
        panel = self.panels[t]
        return panel.offset(index, amount) if panel else amount * self.strides[t][index]

    def _lanes(self, const: int, width: int) -> str:
        """Pointers to `width` output elements a vector's lanes hold, `planner.strided` floats apart."""
        steps = ", ".join(f"i64 {lane * self.planner.strided}" for lane in range(width))
        base = self._address(0, const)
        return self.op(f"getelementptr inbounds float, ptr {base}, <{width} x i64> <{steps}>", "g")

    def _address(self, t: int, const: int) -> str:
        if const == 0:
            return self.pointers[t]
        return self.op(f"getelementptr inbounds float, ptr {self.pointers[t]}, i64 {const}", "a")

    def _emit_tile(self, node: Tile) -> None:
        outer = self.tile
        tile = {"const": self.consts[0], "acc": {}}
        keys = sorted(self.planner.accumulators_at(node.body, 0))
        for key in keys:
            kind, offset, width = key
            if kind == "partial":
                tile["acc"][key] = "zeroinitializer"
            elif kind == "strided":  # lanes a whole output channel apart (packing.channel_vector)
                lanes = self._lanes(tile["const"] + offset, width)
                self.gather_widths.add(width)
                tile["acc"][key] = self.op(
                    f"call {_type(width)} {_gather(width)}(<{width} x ptr> {lanes}, i32 4,"
                    f" {_all_lanes(width)}, {_type(width)} poison)",
                    "c",
                )
            else:
                address = self._address(0, tile["const"] + offset)
                tile["acc"][key] = self.op(f"load {_type(width)}, ptr {address}, align 4", "c")
        self.tile = tile
        self._emit(node.body)
        # Partial sums add onto the output last, after the plain slots of the same elements are stored.
        for key in sorted(keys, key=lambda k: (k[0] == "partial", k)):
            kind, offset, width = key
            value = tile["acc"][key]
            if kind == "strided":  # lanes a whole output channel apart
                lanes = self._lanes(tile["const"] + offset, width)
                self.lines.append(
                    f"  call void {_scatter(width)}({_type(width)} {value}, <{width} x ptr> {lanes}, i32 4,"
                    f" {_all_lanes(width)})"
                )
                continue
            address = self._address(0, tile["const"] + offset)
            if kind == "partial":  # a shuffle tree (reassociated), not one extract and add per lane
                total = self.op(f"load float, ptr {address}, align 4")
                self.reduce_widths.add(width)
                value = self.op(f"call reassoc float {_reduce(width)}(float {total}, {_type(width)} {value})")
                width = 1
            self.lines.append(f"  store {_type(width)} {value}, ptr {address}, align 4")
        self.tile = outer

    def _load_input(self, t: int, width: int) -> str:
        panel = self.panels[t]
        # a column panel (kernels/packing.py) is contiguous along its row index inside a panel
        along_panel = panel is not None and panel.row == self.inner
        contiguous = width > 1 and (self.strides[t][self.inner] == 1 or along_panel)
        key = (t, self.pointers[t], self.consts[t], width, contiguous)
        if key in self.loads:
            return self.loads[key]
        address = self._address(t, self.consts[t])
        if width == 1 or contiguous:
            value = self.op(f"load {_type(width)}, ptr {address}, align 4", "x")
        else:
            vty = _type(width)
            scalar = self.op(f"load float, ptr {address}, align 4", "x")
            lane0 = self.op(f"insertelement {vty} poison, float {scalar}, i64 0")
            value = self.op(
                f"shufflevector {vty} {lane0}, {vty} poison, <{width} x i32> zeroinitializer", "b"
            )
        self.loads[key] = value
        return value

    def _emit_muladd(self, width: int) -> None:
        key = self.planner.slot(self.consts[0] - self.tile["const"], width)
        lhs = self._load_input(1, width)
        rhs = self._load_input(2, width)
        ty = _type(width)
        self.fma_widths.add(width)
        acc = self.tile["acc"][key]
        self.tile["acc"][key] = self.op(f"call {ty} {_fma(width)}({ty} {lhs}, {ty} {rhs}, {ty} {acc})", "acc")


def _type(width: int) -> str:
    return "float" if width == 1 else f"<{width} x float>"


def _reduce(width: int) -> str:
    return f"@llvm.vector.reduce.fadd.v{width}f32"


def _gather(width: int) -> str:
    return f"@llvm.masked.gather.v{width}f32.v{width}p0"


def _scatter(width: int) -> str:
    return f"@llvm.masked.scatter.v{width}f32.v{width}p0"


def _all_lanes(width: int) -> str:
    return f"<{width} x i1> <{', '.join(['i1 true'] * width)}>"


def _fma(width: int) -> str:
    return "@llvm.fma.f32" if width == 1 else f"@llvm.fma.v{width}f32"


def generate_ir(spec: LoopNestSpec, schedule: Schedule, target: Target) -> str:
    """LLVM IR text with `kernel(out, in0, in1)` (out += in0 * in1 as scheduled) and `bench(..., reps)`.

    Where the backend packs (kernels/packing.py: no index contiguous in every tensor, the innermost loop
    runs over the output's contiguous index and an input is strided along it, or the schedule's `pack`
    line names an input), `kernel` copies those inputs into buffers and calls the scheduled nest on them."""
    layout = packed_layout(spec, schedule.compute[-1].index, schedule.pack)
    scheduled = layout.spec if layout else spec
    panels = schedule_panels(spec, schedule)
    emitter = _Emitter(scheduled, schedule, target, panels)
    plan = _checked_plan(emitter.planner, target)
    body = emitter.emit(plan)
    declarations = [
        f"declare {_type(w)} {_fma(w)}({_type(w)}, {_type(w)}, {_type(w)})"
        for w in sorted(emitter.fma_widths)
    ] + [f"declare float {_reduce(w)}(float, {_type(w)})" for w in sorted(emitter.reduce_widths)]
    for w in sorted(emitter.gather_widths):
        declarations += [
            f"declare {_type(w)} {_gather(w)}(<{w} x ptr>, i32, <{w} x i1>, {_type(w)})",
            f"declare void {_scatter(w)}({_type(w)}, <{w} x ptr>, i32, <{w} x i1>)",
        ]
    nest_name = PACKED_NEST_NAME if layout else KERNEL_NAME
    return "\n".join(
        [
            f"; {spec.text()}  ({spec.sizes_text()})",
            *(f"; {line}" for line in schedule.text().splitlines()),
            f"define void @{nest_name}(ptr noalias nocapture %out, ptr noalias nocapture readonly %in0,"
            " ptr noalias nocapture readonly %in1) #0 {",
            body,
            "}",
            "",
            *(_packing_ir(spec, layout, panels, nest_name, target) if layout else _plain_workspace_ir()),
            f"define void @{BENCH_NAME}(ptr %out, ptr %in0, ptr %in1, i64 %reps) {{",
            "entry:",
            "  br label %loop",
            "loop:",
            "  %i = phi i64 [ 0, %entry ], [ %next, %loop ]",
            f"  call void @{KERNEL_NAME}(ptr %out, ptr %in0, ptr %in1)",
            "  %next = add i64 %i, 1",
            "  %more = icmp ult i64 %next, %reps",
            "  br i1 %more, label %loop, label %done",
            "done:",
            "  ret void",
            "}",
            "",
            *declarations,
            "attributes #0 = { noinline nounwind }",
            "",
        ]
    )


def schedule_panels(spec: LoopNestSpec, schedule: Schedule) -> tuple[Panel | None, Panel | None]:
    """Per input: its panel layout where the schedule packs it along the reduction and its row loops keep
    to whole panels (every loop over the row index but the innermost covers whole register tiles: tiled
    schedules do); None elsewhere (where a row-packed input is transposed instead)."""
    panels: list[Panel | None] = [None, None]
    inner = schedule.compute[-1].index
    if inner != spec.output.dims[-1][0]:
        # NCHW's channels: the weights in panels of the register tile's channels where its loops keep them
        # whole, else transposed (packing.channel_panel); nothing else is packed along the reduction then
        # (Schedule.check refuses it)
        if inner == channel_vector(spec) and whole_panels(schedule.compute, inner):
            width = next(lp.size for lp in reversed(schedule.compute) if lp.index == inner)
            panel = channel_panel(spec, width)
            layout = packed_layout(spec, inner)
            if panel is not None and layout is not None:
                position = next(p for p, order in enumerate(layout.orders) if order is not None)
                panels[position] = panel
        return panels[0], panels[1]
    for position, tensor in enumerate(spec.inputs):
        if tensor.name not in schedule.pack:
            continue
        row = panel_row(spec, tensor)
        if whole_panels(schedule.compute, row):
            width = next(lp.size for lp in reversed(schedule.compute) if lp.index == row)
            panels[position] = panel_of(spec, tensor, width)
    return panels[0], panels[1]


def workspace_floats(spec: LoopNestSpec, schedule: Schedule) -> tuple[int, int]:
    """Floats of the buffer `kernel_ws` packs each input into (0: not packed)."""
    layout = packed_layout(spec, schedule.compute[-1].index, schedule.pack)
    if layout is None:
        return 0, 0
    panels = schedule_panels(spec, schedule)
    floats = [0, 0]
    for position, (tensor, order) in enumerate(zip(spec.inputs, layout.orders, strict=True)):
        if order is not None:
            panel = panels[position]
            floats[position] = panel.size if panel else math.prod(spec.shape(tensor))
    return floats[0], floats[1]


def _plain_workspace_ir() -> list[str]:
    """`kernel_ws` of a kernel that packs nothing: the kernel itself."""
    return [
        f"define void @{WORKSPACE_KERNEL_NAME}(ptr %out, ptr %in0, ptr %in1, ptr %ws0, ptr %ws1) {{",
        "entry:",
        f"  call void @{KERNEL_NAME}(ptr %out, ptr %in0, ptr %in1)",
        "  ret void",
        "}",
        "",
    ]


def _packing_ir(
    spec: LoopNestSpec,
    layout: PackedLayout,
    panels: tuple[Panel | None, Panel | None],
    nest_name: str,
    target: Target,
) -> list[str]:
    """Buffers, copy functions and the `kernel` that packs, then runs the scheduled nest on the buffers."""
    lines: list[str] = []
    arguments = ["ptr %out", "ptr %in0", "ptr %in1"]
    workspace_arguments = list(arguments)
    calls, workspace_calls = [], []
    for position, (tensor, order) in enumerate(zip(spec.inputs, layout.orders, strict=True)):
        if order is None:
            continue
        panel = panels[position]
        size = panel.size if panel else math.prod(spec.shape(tensor))
        lines.append(f"@buffer{position} = internal global [{size} x float] zeroinitializer, align 64")
        if panel:
            lines += [panel_function_ir(f"pack{position}", panel), ""]
        else:
            width = min(target.vector_widths[0], COPY_WIDTH) if target.vector_widths else 1
            shape, source = spec.shape(tensor), spec.layout_shape(tensor)
            lines += [pack_function_ir(f"pack{position}", shape, order, width, source), ""]
        lines += [
            f"define void @{PACK_NAMES[position]}(ptr %src, ptr %dst) {{",
            "entry:",
            f"  call void @pack{position}(ptr %src, ptr %dst)",
            "  ret void",
            "}",
            "",
        ]
        calls.append(f"  call void @pack{position}(ptr %in{position}, ptr @buffer{position})")
        workspace_calls.append(f"  call void @pack{position}(ptr %in{position}, ptr %ws{position})")
        arguments[position + 1] = f"ptr @buffer{position}"
        workspace_arguments[position + 1] = f"ptr %ws{position}"
    return [
        *lines,
        f"define void @{KERNEL_NAME}(ptr noalias nocapture %out, ptr noalias nocapture readonly %in0,"
        " ptr noalias nocapture readonly %in1) #0 {",
        "entry:",
        *calls,
        f"  call void @{nest_name}({', '.join(arguments)})",
        "  ret void",
        "}",
        "",
        f"define void @{WORKSPACE_KERNEL_NAME}(ptr noalias nocapture %out,"
        " ptr noalias nocapture readonly %in0, ptr noalias nocapture readonly %in1,"
        " ptr noalias nocapture %ws0, ptr noalias nocapture %ws1) #0 {",
        "entry:",
        *workspace_calls,
        f"  call void @{nest_name}({', '.join(workspace_arguments)})",
        "  ret void",
        "}",
        "",
    ]
