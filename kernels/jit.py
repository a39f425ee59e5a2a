"""Compile generated IR for the host CPU with llvmlite's MCJIT and call it through ctypes.

No IR optimization passes run: the generator already writes register-resident accumulators and simple
addresses, so the IR goes straight to the backend (-O3 instruction selection, register allocation and
scheduling for the host's CPU name and features: AVX2, AVX-512, ...). Nothing can reorder the loops.
"""

from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np

from optserve.kernels.codegen import (
    BENCH_NAME,
    KERNEL_NAME,
    PACK_NAMES,
    PACKED_NEST_NAME,
    WORKSPACE_KERNEL_NAME,
    Target,
    generate_ir,
)
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.llvm_targets import initialize_native_target

_KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_BENCH_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_WORKSPACE_TYPE = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 5)


def new_target_machine() -> llvm.TargetMachine:
    """A target machine for the host; an execution engine owns (and frees) the one it is given."""
    initialize_native_target()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True
    )


@functools.cache
def host_target(max_statements: int = 256) -> Target:
    """Vector widths and register budget of this CPU."""
    initialize_native_target()
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return Target(vector_widths=(16, 8), accumulator_registers=28, max_statements=max_statements)
    if features.get("avx"):
        return Target(vector_widths=(8,), accumulator_registers=12, max_statements=max_statements)
    return Target(vector_widths=(4,), accumulator_registers=12, max_statements=max_statements)


def host_description() -> str:
    initialize_native_target()
    features = llvm.get_host_cpu_features()
    flags = [f for f in ("avx2", "fma", "avx512f") if features.get(f)]
    return f"{llvm.get_host_cpu_name()} ({', '.join(flags) or 'no AVX'})"


@dataclass
class CompiledKernel:
    """A JIT-compiled nest. Call it with (out, in0, in1) float32 C-contiguous arrays: out += in0 * in1."""

    spec: LoopNestSpec
    schedule: Schedule
    compile_seconds: float
    llvm_ir: str
    _engine: llvm.ExecutionEngine
    _kernel: ctypes._CFuncPtr
    _bench: ctypes._CFuncPtr
    workspace: ctypes._CFuncPtr  # kernel_ws(out, in0, in1, ws0, ws1) on raw addresses (codegen.py)
    nest_address: int = 0  # the nest on packed operands, (out, in0, in1): kernel's own where none is packed
    pack_addresses: tuple[int, int] = (0, 0)  # per input, its copy (src, dst) into a buffer; 0: not packed

    def __call__(self, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> None:
        self._check(out, lhs, rhs)
        self._kernel(out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data)

    def run_repeated(self, out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, repeats: int) -> float:
        """Call the kernel `repeats` times back to back inside compiled code; seconds for all of them."""
        self._check(out, lhs, rhs)
        start = time.perf_counter()
        self._bench(out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data, repeats)
        return time.perf_counter() - start

    def _check(self, *arrays: np.ndarray) -> None:
        check_operands(self.spec, arrays)

    def close(self) -> None:
        self._engine.close()


def check_operands(spec: LoopNestSpec, arrays: tuple[np.ndarray, ...]) -> None:
    """ValueError unless (out, in0, in1) are C-contiguous float32 arrays of the spec's shapes, out
    writeable."""
    for tensor, array in zip(spec.tensors, arrays, strict=True):
        shape = spec.shape(tensor)
        if array.dtype != np.float32 or array.shape != shape or not array.flags.c_contiguous:
            raise ValueError(f"{tensor.name} must be a C-contiguous float32 array of shape {shape}")
    if not arrays[0].flags.writeable:
        raise ValueError(f"{spec.output.name} must be writeable")


def compile_schedule(
    spec: LoopNestSpec, schedule: Schedule, target: Target | None = None, keep_ir: bool = False
) -> CompiledKernel:
    """Generate and JIT-compile `schedule`; raises SpecError for a schedule that does not fit."""
    schedule.check(spec)
    start = time.perf_counter()
    text = generate_ir(spec, schedule, target or host_target())
    return compile_ir(spec, schedule, text, keep_ir, start)


def compile_ir(
    spec: LoopNestSpec, schedule: Schedule, text: str, keep_ir: bool = False, start: float | None = None
) -> CompiledKernel:
    """JIT-compile the IR text of `schedule` (generate_ir's); compile seconds count from `start`."""
    start = time.perf_counter() if start is None else start
    parsed = llvm.parse_assembly(text)
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, new_target_machine())
    engine.finalize_object()
    kernel = _KERNEL_TYPE(engine.get_function_address(KERNEL_NAME))
    bench = _BENCH_TYPE(engine.get_function_address(BENCH_NAME))
    workspace = _WORKSPACE_TYPE(engine.get_function_address(WORKSPACE_KERNEL_NAME))
    defined = {function.name for function in parsed.functions if not function.is_declaration}
    nest = PACKED_NEST_NAME if PACKED_NEST_NAME in defined else KERNEL_NAME
    packs = tuple(engine.get_function_address(n) if n in defined else 0 for n in PACK_NAMES)
    seconds = time.perf_counter() - start
    return CompiledKernel(
        spec=spec,
        schedule=schedule,
        compile_seconds=seconds,
        llvm_ir=text if keep_ir else "",
        _engine=engine,
        _kernel=kernel,
        _bench=bench,
        workspace=workspace,
        nest_address=engine.get_function_address(nest),
        pack_addresses=packs,  # type: ignore[arg-type]
    )
