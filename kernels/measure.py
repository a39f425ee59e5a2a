"""GFLOPS of a compiled nest (warm-up, then best of N timed runs) and the machine's empirical peak.

Each timed run calls the kernel back to back inside compiled code (`bench`), enough times to last about
`run_seconds`, so ctypes overhead and timer resolution do not count. The peak is the best GFLOPS of a
register-only kernel with many independent multiply-add chains (thesis §3.6.3: a high arithmetic
intensity kernel, within a few percent of the hardware peak).
"""

from __future__ import annotations

import ctypes
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from optserve.kernels.jit import CompiledKernel, host_target, new_target_machine
from optserve.kernels.spec import LoopNestSpec


@dataclass(frozen=True)
class Timing:
    gflops: float
    seconds: float  # best time of one kernel call
    repeats: int  # calls per timed run (0: a single cold call, cut short by a deadline)


def random_operands(kernel: CompiledKernel, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operands in [-1, 1) for the kernel's spec. The last spec's are kept: the candidates of one search
    share them, since drawing up to 3 x 64 MiB per candidate costs more than timing it."""
    return _operands(kernel.spec, seed)


@functools.lru_cache(maxsize=1)
def _operands(spec: LoopNestSpec, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(  # type: ignore[return-value]
        rng.random(spec.shape(t), dtype=np.float32) * 2 - 1 for t in spec.tensors
    )


def measure(
    kernel: CompiledKernel,
    runs: int = 10,
    warmup_calls: int = 20,
    run_seconds: float = 1e-3,
    deadline: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Best-of-`runs` GFLOPS after `warmup_calls` untimed calls. With a `deadline` (on `clock`), a kernel
    whose protocol would end past it is timed by its first call alone (repeats 0): a slow nest, such as a
    scalar base schedule of a large contraction, then costs one call of a budget instead of many."""
    out, lhs, rhs = random_operands(kernel)
    if deadline is not None:
        first = kernel.run_repeated(out, lhs, rhs, 1)
        if clock() + first * (max(0, warmup_calls - 1) + runs) > deadline:
            return Timing(gflops=kernel.spec.flops / first / 1e9, seconds=first, repeats=0)
        warmup_calls -= 1
    per_call = kernel.run_repeated(out, lhs, rhs, max(1, warmup_calls)) / max(1, warmup_calls)
    repeats = max(1, math.ceil(run_seconds / max(per_call, 1e-9)))
    best = min(kernel.run_repeated(out, lhs, rhs, repeats) for _ in range(runs)) / repeats
    return Timing(gflops=kernel.spec.flops / best / 1e9, seconds=best, repeats=repeats)


def best_call_seconds(
    call: Callable[[], object], runs: int = 5, run_seconds: float = 1e-3, budget_s: float = 0.3
) -> float:
    """Seconds per call of a Python callable (a library's, compared with a kernel's `measure`): a warm-up
    call, then the best of `runs` timed runs of enough calls to last about `run_seconds` each (fewer runs
    where they would take more than `budget_s`)."""
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    repeats = max(1, math.ceil(run_seconds / max(first, 1e-9)))
    runs = max(1, min(runs, int(budget_s / max(first * repeats, 1e-9))))
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(repeats):
            call()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


@functools.cache
def peak_gflops(runs: int = 10) -> float:
    """Empirical single-core peak: independent FMA chains on registers only, best of `runs`."""
    target = host_target()
    width = target.vector_widths[0]
    chains = target.accumulator_registers
    vty = ir.VectorType(ir.FloatType(), width)
    i64 = ir.IntType(64)
    module = ir.Module(name="peak")
    fma = ir.Function(module, ir.FunctionType(vty, [vty, vty, vty]), name=f"llvm.fma.v{width}f32")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [vty.as_pointer(), i64]), name="peak")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    data = fn.args[0]
    scale = b.load(b.gep(data, [ir.Constant(i64, 0)]), align=4)
    shift = b.load(b.gep(data, [ir.Constant(i64, 1)]), align=4)
    starts = [b.load(b.gep(data, [ir.Constant(i64, 2 + j)]), align=4) for j in range(chains)]
    b.branch(loop)
    b.position_at_end(loop)
    counter = b.phi(i64)
    counter.add_incoming(ir.Constant(i64, 0), entry)
    accs = []
    for start in starts:
        phi = b.phi(vty)
        phi.add_incoming(start, entry)
        accs.append(phi)
    values = list(accs)
    for _ in range(8):  # 8 dependent steps per chain per iteration keep loop overhead negligible
        values = [b.call(fma, [v, scale, shift]) for v in values]
    for phi, value in zip(accs, values, strict=True):
        phi.add_incoming(value, loop)
    nxt = b.add(counter, ir.Constant(i64, 1))
    counter.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, fn.args[1]), loop, done)
    b.position_at_end(done)
    for j, value in enumerate(values):
        b.store(value, b.gep(data, [ir.Constant(i64, 2 + j)]), align=4)
    b.ret_void()
    parsed = llvm.parse_assembly(str(module))
    engine = llvm.create_mcjit_compiler(parsed, new_target_machine())
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(engine.get_function_address("peak"))
    buffer = np.full((2 + chains) * width, 0.5, dtype=np.float32)
    buffer[:width] = 0.999
    iterations = 200_000
    call(buffer.ctypes.data, 1000)
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        call(buffer.ctypes.data, iterations)
        best = min(best, time.perf_counter() - start)
    engine.close()
    return 2 * width * chains * 8 * iterations / best / 1e9


def numpy_gflops(m: int, k: int, n: int, runs: int = 10, run_seconds: float = 2e-3) -> float:
    """numpy's matmul GFLOPS for float32 (m x k) @ (k x n): the reference the searches and the policy are
    compared with (set OPENBLAS_NUM_THREADS=1 before numpy loads for the single-thread figure)."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    start = time.perf_counter()
    for _ in range(20):
        np.matmul(a, b, out=c)
    repeats = max(1, math.ceil(run_seconds / ((time.perf_counter() - start) / 20)))
    best = math.inf
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(repeats):
            np.matmul(a, b, out=c)
        best = min(best, (time.perf_counter() - start) / repeats)
    return 2 * m * n * k / best / 1e9
