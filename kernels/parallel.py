"""Parallel kernels: the contraction cut into blocks along one output index, each block a thread's call.

A ctypes call into the JIT releases the GIL, so a plain thread pool runs the blocks on all cores. Blocks are
along an output index, so no two threads write one element: of the output indices with enough elements
for every thread, the one whose loop is outermost in the schedule (its cache blocking stays as scheduled),
else the one with the most. Each block runs the schedule's loop nest restricted to it (`restrict`) on the
whole tensors in memory (LoopNestSpec.block: the block's sizes, the whole tensors' strides), called on
pointers offset to the block's first element; blocks are whole multiples of the schedule's innermost loop
over the index (a register tile), so at most the last block has other tails, and at most two kernels are
compiled. A kernel that packs an operand packs it into a buffer of its block's own (codegen.py kernel_ws).
A contraction too small to pay for the threads' hand-over (MIN_BLOCK_FLOPS each) runs as one kernel.
"""

from __future__ import annotations

import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from optserve.kernels.codegen import Target, workspace_floats
from optserve.kernels.jit import CompiledKernel, check_operands, compile_schedule, host_target
from optserve.kernels.schedule import Loop, Schedule, iteration_extents
from optserve.kernels.spec import FLOAT_BYTES, LoopNestSpec

MIN_BLOCK_FLOPS = 2**23  # ~0.1 ms of work on a core: below it a thread's hand-over costs about as much


@dataclass(frozen=True)
class Block:
    start: int  # first element of the index
    size: int


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


def plan_blocks(
    spec: LoopNestSpec, schedule: Schedule, threads: int, min_block_flops: int = MIN_BLOCK_FLOPS
) -> tuple[str, list[Block]] | None:
    """The index to cut and its blocks (one per thread); None where one kernel should run it all."""
    threads = min(threads, max(1, spec.flops // min_block_flops))
    if threads < 2:
        return None
    size = spec.size_of
    first = {}  # per output index: the position of its outermost loop
    for pos, loop in enumerate(schedule.compute):
        if loop.index in spec.output_indices:
            first.setdefault(loop.index, pos)
    units = {i: _unit(schedule, i) for i in first}
    tiles = {i: -(-size[i] // units[i]) for i in units}
    enough = [i for i in tiles if tiles[i] >= threads]
    index = min(enough, key=first.__getitem__) if enough else max(tiles, key=tiles.__getitem__)
    if tiles[index] < 2:
        return None
    per_block = -(-tiles[index] // min(threads, tiles[index])) * units[index]
    blocks = [Block(s, min(per_block, size[index] - s)) for s in range(0, size[index], per_block)]
    return index, blocks


def _unit(schedule: Schedule, index: str) -> int:
    """Elements of `index` a block is a multiple of: what its innermost loop covers where it is split (a
    register tile's rows or vectors), a vector of 16 where its one loop is the innermost, else 1."""
    loops = [lp for lp in schedule.compute if lp.index == index]
    if len(loops) > 1:
        return loops[-1].size + loops[-1].tail
    return 16 if schedule.compute[-1].index == index else 1


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernel-block")


@dataclass
class ParallelKernel:
    """A contraction run as blocks on threads; called like CompiledKernel (one call at a time)."""

    spec: LoopNestSpec
    schedule: Schedule
    index: str
    blocks: list[Block]
    kernels: dict[int, CompiledKernel]  # per block size
    compile_seconds: float
    workspaces: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    offsets: list[tuple[int, int, int]] = field(default_factory=list)  # per block: bytes into each tensor

    @property
    def threads(self) -> int:
        return len(self.blocks)

    @property
    def llvm_ir(self) -> str:
        return self.kernels[self.blocks[0].size].llvm_ir

    def __post_init__(self) -> None:
        strides = [self.spec.strides(t)[self.index] for t in self.spec.tensors]
        for block in self.blocks:
            self.offsets.append(tuple(block.start * s * FLOAT_BYTES for s in strides))  # type: ignore[arg-type]
            floats = workspace_floats(self.kernels[block.size].spec, self.kernels[block.size].schedule)
            self.workspaces.append(tuple(np.empty(max(1, n), np.float32) for n in floats))  # type: ignore[arg-type]

    def __call__(self, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> None:
        check_operands(self.spec, (out, lhs, rhs))
        self._run(out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)

    def run_repeated(self, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, repeats: int) -> float:
        """Seconds for `repeats` calls one after the other (each one hands every block to a thread)."""
        check_operands(self.spec, (out, lhs, rhs))
        pointers = (out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)
        start = time.perf_counter()
        for _ in range(repeats):
            self._run(*pointers)
        return time.perf_counter() - start

    def _call_block(self, position: int, out: int, lhs: int, rhs: int) -> None:
        block = self.blocks[position]
        offsets = self.offsets[position]
        ws0, ws1 = self.workspaces[position]
        self.kernels[block.size].workspace(
            out + offsets[0], lhs + offsets[1], rhs + offsets[2], ws0.ctypes.data, ws1.ctypes.data
        )

    def _run(self, out: int, lhs: int, rhs: int) -> None:
        pool = _pool(self.threads - 1)
        futures = [pool.submit(self._call_block, p, out, lhs, rhs) for p in range(1, self.threads)]
        self._call_block(0, out, lhs, rhs)
        for future in futures:
            future.result()

    def close(self) -> None:
        for kernel in self.kernels.values():
            kernel.close()


def compile_parallel(
    spec: LoopNestSpec,
    schedule: Schedule,
    threads: int,
    target: Target | None = None,
    keep_ir: bool = False,
    min_block_flops: int = MIN_BLOCK_FLOPS,
) -> CompiledKernel | ParallelKernel:
    """`schedule` compiled to run on up to `threads` threads: a ParallelKernel, or one CompiledKernel where
    one thread should run it (threads 1, or too little work to share). Raises SpecError as
    compile_schedule does."""
    schedule.check(spec)
    plan = plan_blocks(spec, schedule, threads, min_block_flops) if threads > 1 else None
    if plan is None:
        return compile_schedule(spec, schedule, target=target or host_target(), keep_ir=keep_ir)
    index, blocks = plan
    start = time.perf_counter()
    kernels: dict[int, CompiledKernel] = {}
    try:
        for size in sorted({b.size for b in blocks}, reverse=True):
            block_spec = spec.block(index, size)
            block_schedule = restrict(schedule, block_spec, index, size)
            kernels[size] = compile_schedule(
                block_spec, block_schedule, target=target or host_target(), keep_ir=keep_ir
            )
    except Exception:
        for kernel in kernels.values():
            kernel.close()
        raise
    return ParallelKernel(spec, schedule, index, blocks, kernels, time.perf_counter() - start)


def default_threads() -> int:
    """The CPUs this process may run on (its affinity: a container's or a taskset's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
