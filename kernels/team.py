"""A table of native calls run by a team of threads, in phases with a barrier between them.

A parallel kernel (kernels/parallel.py) is a few calls per thread: copies of packed operands, then the
blocks' nests. Handed one by one to Python threads, every call costs a GIL hand-over and a futex wake-up:
tens of microseconds on 16 threads, as long as a whole 256^3 matmul takes there. So the table is run by
compiled code: one ctypes call into `run_tasks`, which opens an OpenMP parallel region (libgomp's
`GOMP_parallel`, the runtime PyTorch and the usual BLAS builds already load) in which every thread walks its
part of the table, with `GOMP_barrier` between phases (the copies of a packed operand are done before any
nest reads them). Where no libgomp can be loaded, a Python thread pool runs the same table (`native`).

The table: records of five int64 (function address; argument count, 2 or 3; three pointer arguments), and
per phase and thread slot a [start, end) range of records. A team smaller than asked (a nested region,
OMP_THREAD_LIMIT) still runs every slot: thread t runs slots t, t + team, ...

On a host whose load average is more than OVERSUBSCRIBED times its CPUs, a team that meets at spinning
barriers waits scheduler time slices at every call (a 2-cell matvec on the shared 2-core machine at load
36: 18 ms, against 24 us on one thread; Python threads that sleep while they wait: 75 us), so the table
runs on a team of one there, every slot in order on the calling thread; the load is read once a second.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from optserve.kernels.jit import new_target_machine

RECORD = 5  # int64 per record: function, argument count, three arguments
ABSOLUTE = 3  # an argument's base: 0..2 the call's out, in0, in1; ABSOLUTE: its offset is an address
OVERSUBSCRIBED = 2.0  # load average per CPU above which a table runs on a team of one

_RUNTIME_IR = """
declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare void @GOMP_barrier()
declare i32 @omp_get_thread_num()
declare i32 @omp_get_num_threads()

define internal void @body(ptr %data) {
entry:
  %tid32 = call i32 @omp_get_thread_num()
  %tid = zext i32 %tid32 to i64
  %team32 = call i32 @omp_get_num_threads()
  %team = zext i32 %team32 to i64
  %slots = load i64, ptr %data
  %phases.at = getelementptr inbounds i64, ptr %data, i64 1
  %phases = load i64, ptr %phases.at
  %ranges.at = getelementptr inbounds i64, ptr %data, i64 2
  %ranges = load ptr, ptr %ranges.at
  %records.at = getelementptr inbounds i64, ptr %data, i64 3
  %records = load ptr, ptr %records.at
  br label %phase
phase:
  %p = phi i64 [ 0, %entry ], [ %p.next, %phase.end ]
  %first = icmp eq i64 %p, 0
  br i1 %first, label %slot.head, label %barrier
barrier:
  call void @GOMP_barrier()
  br label %slot.head
slot.head:
  %has.slot = icmp ult i64 %tid, %slots
  br i1 %has.slot, label %slot, label %phase.end
slot:
  %s = phi i64 [ %tid, %slot.head ], [ %s.next, %slot.end ]
  %row = mul i64 %p, %slots
  %cell = add i64 %row, %s
  %at2 = shl i64 %cell, 1
  %start.at = getelementptr inbounds i64, ptr %ranges, i64 %at2
  %start = load i64, ptr %start.at
  %end.at = getelementptr inbounds i64, ptr %start.at, i64 1
  %end = load i64, ptr %end.at
  %empty = icmp uge i64 %start, %end
  br i1 %empty, label %slot.end, label %task
task:
  %i = phi i64 [ %start, %slot ], [ %i.next, %task.end ]
  %offset = mul i64 %i, 5
  %record = getelementptr inbounds i64, ptr %records, i64 %offset
  %fn = load ptr, ptr %record
  %count.at = getelementptr inbounds i64, ptr %record, i64 1
  %count = load i64, ptr %count.at
  %a0.at = getelementptr inbounds i64, ptr %record, i64 2
  %a0 = load ptr, ptr %a0.at
  %a1.at = getelementptr inbounds i64, ptr %record, i64 3
  %a1 = load ptr, ptr %a1.at
  %a2.at = getelementptr inbounds i64, ptr %record, i64 4
  %a2 = load ptr, ptr %a2.at
  %two = icmp eq i64 %count, 2
  br i1 %two, label %call2, label %call3
call2:
  call void %fn(ptr %a0, ptr %a1)
  br label %task.end
call3:
  call void %fn(ptr %a0, ptr %a1, ptr %a2)
  br label %task.end
task.end:
  %i.next = add i64 %i, 1
  %more = icmp ult i64 %i.next, %end
  br i1 %more, label %task, label %slot.end
slot.end:
  %s.next = add i64 %s, %team
  %more.slots = icmp ult i64 %s.next, %slots
  br i1 %more.slots, label %slot, label %phase.end
phase.end:
  %p.next = add i64 %p, 1
  %more.phases = icmp ult i64 %p.next, %phases
  br i1 %more.phases, label %phase, label %done
done:
  ret void
}

define void @run_tasks(ptr %data) {
entry:
  %team.at = getelementptr inbounds i64, ptr %data, i64 4
  %team = load i64, ptr %team.at
  %threads = trunc i64 %team to i32
  call void @GOMP_parallel(ptr @body, ptr %data, i32 %threads, i32 0)
  ret void
}
"""


def _libgomp() -> str | None:
    """The libgomp this process already maps (PyTorch's, a BLAS's), else the system's; None if neither."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1]
            if Path(path).name.startswith("libgomp") and ".so" in path:
                return path
    except OSError:  # pragma: no cover - not Linux
        pass
    return ctypes.util.find_library("gomp")


@functools.cache
def _native_runner() -> tuple[object, ctypes._CFuncPtr] | None:
    """`run_tasks(table)` compiled against libgomp (the engine kept alive with it), or None."""
    library = _libgomp()
    if library is None:
        return None
    try:
        llvm.load_library_permanently(library)
        module = llvm.parse_assembly(_RUNTIME_IR)
        module.verify()
        engine = llvm.create_mcjit_compiler(module, new_target_machine())
        engine.finalize_object()
        address = engine.get_function_address("run_tasks")
    except (RuntimeError, OSError):  # pragma: no cover - a libgomp without the GOMP_parallel entry
        return None
    return engine, ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)


_load_checked = [0.0, False]  # when the load was last read, and whether the host was oversubscribed then


def oversubscribed() -> bool:
    """Whether the 1-minute load average exceeds OVERSUBSCRIBED times this process's CPUs (read at most
    once a second)."""
    now = time.monotonic()
    if now - _load_checked[0] > 1.0:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
        _load_checked[:] = [now, os.getloadavg()[0] > OVERSUBSCRIBED * cpus]
    return bool(_load_checked[1])


def native_available() -> bool:
    """Whether tables run in an OpenMP region (else on a Python thread pool)."""
    return _native_runner() is not None


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernel-block")


_SIGNATURES = {
    2: ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 2),
    3: ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 3),
}


@dataclass(frozen=True)
class Task:
    """One native call: `function(*arguments)`, each argument (base, offset): base 0..2 the call's out, in0
    or in1 (offset in bytes), or ABSOLUTE (offset: an address, a packing buffer's)."""

    function: int
    arguments: tuple[tuple[int, int], ...]


@dataclass
class TaskTable:
    """Tasks per phase and thread slot, run by `run` with the call's three tensor addresses."""

    phases: list[list[list[Task]]]  # [phase][slot] -> tasks in order
    native: bool = True
    _records: np.ndarray = field(init=False)
    _bases: np.ndarray = field(init=False)
    _offsets: np.ndarray = field(init=False)
    _ranges: np.ndarray = field(init=False)
    _header: np.ndarray = field(init=False)
    _last: tuple[int, int, int] | None = field(init=False, default=None)

    @property
    def slots(self) -> int:
        return max(len(phase) for phase in self.phases)

    def __post_init__(self) -> None:
        self.native = self.native and native_available()
        slots = self.slots
        records, bases, offsets, ranges = [], [], [], []
        for phase in self.phases:
            for slot in range(slots):
                tasks = phase[slot] if slot < len(phase) else []
                ranges += [len(records), len(records) + len(tasks)]
                for task in tasks:
                    padded = list(task.arguments) + [(ABSOLUTE, 0)] * (3 - len(task.arguments))
                    records.append([task.function, len(task.arguments), 0, 0, 0])
                    bases.append([b for b, _ in padded])
                    offsets.append([o for _, o in padded])
        self._records = np.array(records or [[0] * RECORD], dtype=np.int64).reshape(-1, RECORD)
        self._bases = np.array(bases or [[ABSOLUTE] * 3], dtype=np.int64).reshape(-1, 3)
        self._offsets = np.array(offsets or [[0] * 3], dtype=np.int64).reshape(-1, 3)
        self._ranges = np.array(ranges, dtype=np.int64)
        self._header = np.array(
            [slots, len(self.phases), self._ranges.ctypes.data, self._records.ctypes.data, slots],
            dtype=np.int64,
        )

    def run(self, out: int, in0: int, in1: int) -> None:
        """Run every phase (each after the one before has finished on every slot) on these tensors."""
        if self._last != (out, in0, in1):
            addresses = np.array([out, in0, in1, 0], dtype=np.int64)
            self._records[:, 2:] = addresses[self._bases] + self._offsets
            self._last = (out, in0, in1)
        slots = self.slots
        if self.native:
            self._header[4] = 1 if oversubscribed() else slots
            _native_runner()[1](self._header.ctypes.data)  # type: ignore[index]
            return
        if oversubscribed():
            self._run_span(0, int(self._ranges[-1]))  # every record, phase after phase, in order
            return
        pool = _pool(slots - 1) if slots > 1 else None
        for phase in range(len(self.phases)):
            row = phase * slots
            spans = [
                (int(self._ranges[2 * (row + s)]), int(self._ranges[2 * (row + s) + 1])) for s in range(slots)
            ]
            futures = (
                [pool.submit(self._run_span, *span) for span in spans[1:] if span[0] < span[1]]
                if pool
                else []
            )
            self._run_span(*spans[0])
            for future in futures:
                future.result()

    def _run_span(self, start: int, end: int) -> None:
        for function, count, *arguments in self._records[start:end].tolist():
            _SIGNATURES[count](function)(*arguments[:count])
