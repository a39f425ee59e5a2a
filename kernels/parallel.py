"""Parallel kernels: the contraction cut into blocks along one or two output indices, each cell a thread's.

Blocks are along output indices, so no two threads write one element. The cut (`plan_blocks`) is the
grid of one or two output indices (M blocks x N blocks for a matmul) that gives the most speed-up for the
threads, blocks being whole multiples of the schedule's innermost loop over their index (a register tile),
so every cell but those at the grid's last row and column is one kernel, and at most four are compiled;
of the grids within 3 % of the best speed-up, the one whose cells read the least of the inputs (a square
grid rather than strips that each read all of B), then the fewest cells. Each cell runs the schedule's
loop nest restricted to it (`restrict`) on the whole tensors in memory (LoopNestSpec.block: the cell's
sizes, the whole tensors' strides), on pointers offset to the cell's first element.

A packed operand (kernels/packing.py) is copied once per part of it that cells read: the cells that read
the same columns of B share one buffer, filled by one task before any of them runs (the first phase of
the kernel's task table, kernels/team.py); unshared, every strip of rows copied the whole of B again (16
copies of it on 16 threads). A contraction too small to pay for the threads' hand-over runs as one
kernel: below MIN_BLOCK_WORK per thread, where work is its floating-point operations or, for one that
streams its operands (matvec), eight per byte it reads and writes.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from optserve.kernels import team
from optserve.kernels.codegen import Target, check_code_size, workspace_floats
from optserve.kernels.jit import CompiledKernel, check_operands, compile_schedule, host_target
from optserve.kernels.schedule import Loop, Schedule, iteration_extents
from optserve.kernels.spec import FLOAT_BYTES, LoopNestSpec

# work per thread (floating-point operations, or eight per byte streamed) below which a thread's hand-over
# costs about as much as its share: ~10 us on a core where an OpenMP team runs the table, ~80 us where
# Python threads do (kernels/team.py)
MIN_BLOCK_WORK = 2**20
MIN_BLOCK_WORK_PYTHON = 2**23
BYTE_WORK = 8  # a streamed byte costs about eight multiply-adds' time (matvec ~13, matmul ~110 GFLOPS)
NEAR_BEST = 0.97  # grids within this share of the best speed-up are compared by what their cells read


@dataclass(frozen=True)
class Block:
    start: int  # first element of the index
    size: int


@dataclass(frozen=True)
class Grid:
    """Blocks of one or two output indices; a cell (one block of each) is one thread's nest."""

    cuts: tuple[tuple[str, tuple[Block, ...]], ...]

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(index for index, _ in self.cuts)

    @property
    def cells(self) -> list[tuple[Block, ...]]:
        return list(itertools.product(*(blocks for _, blocks in self.cuts)))

    @property
    def threads(self) -> int:
        return math.prod(len(blocks) for _, blocks in self.cuts)


def restrict(schedule: Schedule, spec: LoopNestSpec, index: str, size: int) -> Schedule:
    """The schedule's compute nest over `size` elements of `index` (spec: the block's): the loops over it
    that cover no more than `size` keep their extents, the outermost of them covers the block (with a
    tail), and the ones above it go. The write-back nest is the block's base one (it emits no code)."""
    extents = iteration_extents(schedule.compute)
    positions = [p for p, lp in enumerate(schedule.compute) if lp.index == index]
    keep = next(p for p in positions if extents[p] <= size)
    compute: list[Loop] = []
    for pos, loop in enumerate(schedule.compute):
        if loop.index != index or pos > keep:
            compute.append(loop)
        elif pos == keep:
            compute.append(Loop(index, size // extents[pos], size % extents[pos]))
    return Schedule(tuple(compute), Schedule.base(spec).writeback, schedule.pack)


def work(spec: LoopNestSpec) -> int:
    """The contraction's cost in multiply-add units: its FLOPs, or BYTE_WORK per byte of its tensors where
    that is more (a matvec streams its matrix once)."""
    nbytes = sum(math.prod(spec.shape(t)) for t in spec.tensors) * FLOAT_BYTES
    return max(spec.flops, BYTE_WORK * nbytes)


def plan_blocks(
    spec: LoopNestSpec, schedule: Schedule, threads: int, min_block_work: int | None = None
) -> Grid | None:
    """The grid of cells (at most `threads`); None where one kernel should run it all."""
    if min_block_work is None:
        min_block_work = MIN_BLOCK_WORK if team.native_available() else MIN_BLOCK_WORK_PYTHON
    threads = min(threads, max(1, work(spec) // min_block_work))
    if threads < 2:
        return None
    size = spec.size_of
    first: dict[str, int] = {}  # per output index: the position of its outermost loop
    for pos, loop in enumerate(schedule.compute):
        if loop.index in spec.output_indices:
            first.setdefault(loop.index, pos)
    order = sorted(first, key=first.__getitem__)
    units = {i: _unit(schedule, i) for i in order}
    tiles = {i: -(-size[i] // units[i]) for i in order}

    def blocks(index: str, parts: int) -> tuple[Block, ...]:
        per_block = -(-tiles[index] // parts) * units[index]
        return tuple(Block(s, min(per_block, size[index] - s)) for s in range(0, size[index], per_block))

    grids = []
    for a, first_index in enumerate(order):
        for parts in range(2, min(threads, tiles[first_index]) + 1):
            grids.append(Grid(((first_index, blocks(first_index, parts)),)))
        for second in order[a + 1 :]:
            for parts in range(2, min(threads // 2, tiles[first_index]) + 1):
                for other in range(2, min(threads // parts, tiles[second]) + 1):
                    cut = ((first_index, blocks(first_index, parts)), (second, blocks(second, other)))
                    grids.append(Grid(cut))
    grids = [g for g in grids if 2 <= g.threads <= threads]
    if not grids:
        return None
    speedups = {g: _speedup(g) for g in grids}
    best = max(speedups.values())
    near = [g for g in grids if speedups[g] >= NEAR_BEST * best]
    return min(near, key=lambda g: (_cell_reads(spec, g), g.threads, [first[i] for i in g.indices]))


def _speedup(grid: Grid) -> float:
    """Elements of the cut indices over those of the largest cell: the speed-up if cells cost their size."""
    whole = math.prod(blocks[-1].start + blocks[-1].size for _, blocks in grid.cuts)
    return whole / math.prod(blocks[0].size for _, blocks in grid.cuts)


def _cell_reads(spec: LoopNestSpec, grid: Grid) -> int:
    """Input elements the largest cell reads."""
    cell = spec
    for index, blocks in grid.cuts:
        cell = cell.block(index, blocks[0].size)
    return sum(math.prod(cell.shape(t)) for t in cell.inputs)


def _unit(schedule: Schedule, index: str) -> int:
    """Elements of `index` a block is a multiple of: what its innermost loop covers where it is split (a
    register tile's rows or vectors), a vector of 16 where its one loop is the innermost, else 1."""
    loops = [lp for lp in schedule.compute if lp.index == index]
    if len(loops) > 1:
        return loops[-1].size + loops[-1].tail
    return 16 if schedule.compute[-1].index == index else 1


@dataclass
class ParallelKernel:
    """A contraction run as cells on a team of threads; called like CompiledKernel (one call at a time)."""

    spec: LoopNestSpec
    schedule: Schedule
    grid: Grid
    kernels: dict[tuple[int, ...], CompiledKernel]  # per cell's sizes along the grid's indices
    compile_seconds: float
    native: bool = True  # an OpenMP team runs the table (kernels/team.py), else Python threads
    buffers: list[np.ndarray] = field(default_factory=list)  # packed operands' copies, one per shared part
    table: team.TaskTable = field(init=False)

    @property
    def threads(self) -> int:
        return self.grid.threads

    @property
    def llvm_ir(self) -> str:
        return self.kernels[self._sizes(self.grid.cells[0])].llvm_ir

    def _sizes(self, cell: tuple[Block, ...]) -> tuple[int, ...]:
        return tuple(block.size for block in cell)

    def __post_init__(self) -> None:
        strides = [self.spec.strides(t) for t in self.spec.tensors]
        indices = self.grid.indices
        packs: list[team.Task] = []
        nests: list[team.Task] = []
        shared: dict[tuple, int] = {}  # per input and part of it: its buffer's address
        for cell in self.grid.cells:
            kernel = self.kernels[self._sizes(cell)]
            offsets = [
                sum(b.start * s[i] for i, b in zip(indices, cell, strict=True)) * FLOAT_BYTES for s in strides
            ]
            floats = workspace_floats(kernel.spec, kernel.schedule)
            arguments = [(0, offsets[0])]
            for position in (0, 1):
                tensor = position + 1
                if not kernel.pack_addresses[position]:
                    arguments.append((tensor, offsets[tensor]))
                    continue
                part = tuple(
                    (i, b.start, b.size) for i, b in zip(indices, cell, strict=True) if strides[tensor][i]
                )
                key = (position, part, floats[position])
                if key not in shared:
                    self.buffers.append(np.empty(max(1, floats[position]), np.float32))
                    shared[key] = self.buffers[-1].ctypes.data
                    source = (tensor, offsets[tensor])
                    packs.append(
                        team.Task(kernel.pack_addresses[position], (source, (team.ABSOLUTE, shared[key])))
                    )
                arguments.append((team.ABSOLUTE, shared[key]))
            nests.append(team.Task(kernel.nest_address, tuple(arguments)))
        slots = len(nests)
        phases = [[nests[s : s + 1] for s in range(slots)]]
        if packs:
            phases.insert(0, [packs[s::slots] for s in range(slots)])
        self.table = team.TaskTable(phases, native=self.native)
        self.native = self.table.native

    def __call__(self, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> None:
        check_operands(self.spec, (out, lhs, rhs))
        self.table.run(out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)

    def run_repeated(self, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, repeats: int) -> float:
        """Seconds for `repeats` calls one after the other (each one runs the whole table)."""
        check_operands(self.spec, (out, lhs, rhs))
        pointers = (out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)
        run = self.table.run
        start = time.perf_counter()
        for _ in range(repeats):
            run(*pointers)
        return time.perf_counter() - start

    def close(self) -> None:
        for kernel in self.kernels.values():
            kernel.close()


def compile_parallel(
    spec: LoopNestSpec,
    schedule: Schedule,
    threads: int,
    target: Target | None = None,
    keep_ir: bool = False,
    min_block_work: int | None = None,
    native: bool = True,
) -> CompiledKernel | ParallelKernel:
    """`schedule` compiled to run on up to `threads` threads: a ParallelKernel, or one CompiledKernel where
    one thread should run it (threads 1, or too little work to share). `native` False: Python threads run
    the cells even where an OpenMP team could. Raises SpecError as compile_schedule does."""
    schedule.check(spec)
    grid = plan_blocks(spec, schedule, threads, min_block_work) if threads > 1 else None
    if grid is None:
        return compile_schedule(spec, schedule, target=target or host_target(), keep_ir=keep_ir)
    start = time.perf_counter()
    kernels: dict[tuple[int, ...], CompiledKernel] = {}
    try:
        for sizes, (cell_spec, cell_schedule) in cell_nests(spec, schedule, grid).items():
            kernels[sizes] = compile_schedule(
                cell_spec, cell_schedule, target=target or host_target(), keep_ir=keep_ir
            )
    except Exception:
        for kernel in kernels.values():
            kernel.close()
        raise
    return ParallelKernel(spec, schedule, grid, kernels, time.perf_counter() - start, native)


def cell_nests(
    spec: LoopNestSpec, schedule: Schedule, grid: Grid
) -> dict[tuple[int, ...], tuple[LoopNestSpec, Schedule]]:
    """Per distinct cell size along the grid's indices: the cell's contraction and its restricted nest."""
    nests: dict[tuple[int, ...], tuple[LoopNestSpec, Schedule]] = {}
    for cell in grid.cells:
        sizes = tuple(block.size for block in cell)
        if sizes in nests:
            continue
        cell_spec, cell_schedule = spec, schedule
        for index, size in zip(grid.indices, sizes, strict=True):
            cell_spec = cell_spec.block(index, size)
            cell_schedule = restrict(cell_schedule, cell_spec, index, size)
        nests[sizes] = (cell_spec, cell_schedule)
    return nests


def check_parallel(
    spec: LoopNestSpec, schedule: Schedule, threads: int, target: Target | None = None
) -> None:
    """Raise SpecError where compile_parallel would, without generating or compiling any code."""
    schedule.check(spec)
    grid = plan_blocks(spec, schedule, threads) if threads > 1 else None
    nests = cell_nests(spec, schedule, grid).values() if grid else [(spec, schedule)]
    for nest_spec, nest_schedule in nests:
        check_code_size(nest_spec, nest_schedule, target or host_target())


def default_threads() -> int:
    """The CPUs this process may run on (its affinity: a container's or a taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
