"""A table of native calls run by a team of threads, in phases, each phase's calls after the one before.

A parallel kernel (kernels/parallel.py) is a few calls per thread: copies of packed operands, then the
blocks' nests. Handed one by one to Python threads, every call costs a GIL hand-over and a futex wake-up:
tens of microseconds on 16 threads, as long as a whole 256^3 matmul takes there. So the table is run by
compiled code, in one ctypes call.

The claiming team (`_CLAIM_IR`, tables of at most CLAIM_CELLS (phase, slot) cells): worker threads of its
own (pthreads, started as tables need them) watch a generation counter; the caller publishes the table
under a new generation and claims cells itself, one bit each in the claim word beside the generation (a
compare-and-swap, so a late worker can never claim a cell of another call), its own slot first, then any
left; worker t claims slot t, then any left; a cell of a later phase runs once every cell before that
phase is done. The caller then waits only for cells that workers have claimed: a worker that has not
woken up or got a core yet (a loaded host) costs nothing, the caller runs its cell. Idle workers spin
SPIN_PAUSES pauses, then sleep on a futex the caller wakes. An OpenMP team (libgomp's `GOMP_parallel`, the
runtime PyTorch and the usual BLAS builds already load, `_RUNTIME_IR`) runs larger tables, and the claiming
team's tables where it cannot be compiled; there every thread runs its own slots (thread t: t, t + team,
...) with `GOMP_barrier` between phases, and the caller waits at the region's end for every thread. On the
shared 2-core machine under load that waited a time slice a call: libgomp's idle threads spin for
milliseconds (taking the core the others need): a 2-cell A·B^T 144x500x72 ran at a median 1.8-30 GFLOPS a
call in three of four A/Bs at loads of 8-13 (118 in the fourth), against ~97 on one thread, and the claiming
team at 68-82 in all four (benchmarks/looptune_team_ab.py). Where no team can be compiled, a Python thread
pool runs the same table (`native` False).

The table: records of five int64 (function address; argument count, 2 or 3; three pointer arguments), and
per phase and thread slot a [start, end) range of records.

On a host whose load average is more than OVERSUBSCRIBED times its CPUs, every table runs on a team of
one, every slot in order on the calling thread (the OpenMP team's calls there waited time slices: a 2-cell
matvec at load 36, 18 ms against 24 us on one thread); the load is read once a second.
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
CLAIM_CELLS = 32  # (phase, slot) cells of a table the claiming team runs (one bit each); more: OpenMP
SPIN_PAUSES = int(os.environ.get("OPTSERVE_TEAM_SPIN", "4000"))  # a claiming worker's pauses before it sleeps

# One cell: the calls of its record range; the OpenMP body and the claiming team share it (the data and the
# team's header both hold the ranges at word 2 and the call records at word 3).
_RUN_CELL_IR = """
define internal void @run_cell(ptr %header, i64 %cell) {
entry:
  %ranges.at = getelementptr inbounds i64, ptr %header, i64 2
  %ranges = load ptr, ptr %ranges.at
  %records.at = getelementptr inbounds i64, ptr %header, i64 3
  %records = load ptr, ptr %records.at
  %at2 = shl i64 %cell, 1
  %start.at = getelementptr inbounds i64, ptr %ranges, i64 %at2
  %start = load i64, ptr %start.at
  %end.at = getelementptr inbounds i64, ptr %start.at, i64 1
  %end = load i64, ptr %end.at
  %empty = icmp uge i64 %start, %end
  br i1 %empty, label %done, label %task
task:
  %i = phi i64 [ %start, %entry ], [ %i.next, %task.end ]
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
  br i1 %more, label %task, label %done
done:
  ret void
}
"""

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
  call void @run_cell(ptr %data, i64 %cell)
  br label %slot.end
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

_CLAIM_IR = """
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()
declare void @llvm.x86.sse2.pause()
declare i32 @llvm.cttz.i32(i32, i1)

define internal void @wait_done(ptr %done.at, i64 %need) {
entry:
  %spins.p = alloca i64
  store i64 0, ptr %spins.p
  br label %check
check:
  %d = load atomic i64, ptr %done.at acquire, align 8
  %ok = icmp uge i64 %d, %need
  br i1 %ok, label %out, label %spin
spin:
  call void @llvm.x86.sse2.pause()
  %spins = load i64, ptr %spins.p
  %spins.next = add i64 %spins, 1
  store i64 %spins.next, ptr %spins.p
  %low = and i64 %spins.next, 255
  %yield = icmp eq i64 %low, 0
  br i1 %yield, label %do.yield, label %check
do.yield:
  %ignored = call i32 @sched_yield()
  br label %check
out:
  ret void
}

define internal void @work(ptr %state, i64 %gen, i64 %tid) {
entry:
  %job.at = getelementptr inbounds i64, ptr %state, i64 1
  %done.at = getelementptr inbounds i64, ptr %state, i64 24
  %slots.at = getelementptr inbounds i64, ptr %state, i64 8
  %phases.at = getelementptr inbounds i64, ptr %state, i64 9
  %slots = load atomic i64, ptr %slots.at monotonic, align 8
  %phases = load atomic i64, ptr %phases.at monotonic, align 8
  %jobint = load atomic i64, ptr %job.at monotonic, align 8
  %header = inttoptr i64 %jobint to ptr
  %outside = icmp uge i64 %tid, %slots
  br i1 %outside, label %out, label %start
start:
  %pref = add i64 %tid, 0
  %one.shl = shl i64 1, %slots
  %pmask64 = sub i64 %one.shl, 1
  %pmask = trunc i64 %pmask64 to i32
  br label %phase
phase:
  %p = phi i64 [ 0, %start ], [ %p.next, %phase.next ]
  %base = mul i64 %p, %slots
  %base32 = trunc i64 %base to i32
  %mask = shl i32 %pmask, %base32
  %pbit.pos64 = add i64 %base, %pref
  %pbit.pos = trunc i64 %pbit.pos64 to i32
  %pbit = shl i32 1, %pbit.pos
  br label %claim
claim:
  %w = load atomic i64, ptr %state acquire, align 8
  %wgen = lshr i64 %w, 32
  %same = icmp eq i64 %wgen, %gen
  br i1 %same, label %claim.free, label %out
claim.free:
  %bits = trunc i64 %w to i32
  %taken = and i32 %bits, %mask
  %free = xor i32 %taken, %mask
  %none = icmp eq i32 %free, 0
  br i1 %none, label %phase.next, label %pick
pick:
  %pfree = and i32 %free, %pbit
  %has.pref = icmp ne i32 %pfree, 0
  %lowest = call i32 @llvm.cttz.i32(i32 %free, i1 true)
  %pos = select i1 %has.pref, i32 %pbit.pos, i32 %lowest
  %bit = shl i32 1, %pos
  %bit64 = zext i32 %bit to i64
  %neww = or i64 %w, %bit64
  %pair = cmpxchg ptr %state, i64 %w, i64 %neww acq_rel acquire
  %claimed = extractvalue { i64, i1 } %pair, 1
  br i1 %claimed, label %run, label %claim
run:
  %cell = zext i32 %pos to i64
  call void @wait_done(ptr %done.at, i64 %base)
  call void @run_cell(ptr %header, i64 %cell)
  %old = atomicrmw add ptr %done.at, i64 1 release
  br label %claim
phase.next:
  %p.next = add i64 %p, 1
  %more = icmp ult i64 %p.next, %phases
  br i1 %more, label %phase, label %out
out:
  ret void
}

define internal ptr @worker(ptr %state) {
entry:
  %seen.p = alloca i32
  %spins.p = alloca i64
  %ids.at = getelementptr inbounds i64, ptr %state, i64 6
  %t0 = atomicrmw add ptr %ids.at, i64 1 seq_cst
  %tid = add i64 %t0, 1
  %epoch.at = getelementptr inbounds i64, ptr %state, i64 16
  %sleepers.at = getelementptr inbounds i64, ptr %state, i64 17
  %limit.at = getelementptr inbounds i64, ptr %state, i64 7
  %e0 = load atomic i32, ptr %epoch.at acquire, align 8
  store i32 %e0, ptr %seen.p
  store i64 0, ptr %spins.p
  br label %look
look:
  %e = load atomic i32, ptr %epoch.at acquire, align 8
  %seen = load i32, ptr %seen.p
  %new = icmp ne i32 %e, %seen
  br i1 %new, label %take, label %spin
take:
  store i32 %e, ptr %seen.p
  %w = load atomic i64, ptr %state acquire, align 8
  %gen = lshr i64 %w, 32
  call void @work(ptr %state, i64 %gen, i64 %tid)
  store i64 0, ptr %spins.p
  br label %look
spin:
  call void @llvm.x86.sse2.pause()
  %spins = load i64, ptr %spins.p
  %spins.next = add i64 %spins, 1
  store i64 %spins.next, ptr %spins.p
  %limit = load atomic i64, ptr %limit.at monotonic, align 8
  %long = icmp ugt i64 %spins.next, %limit
  br i1 %long, label %sleep, label %look
sleep:
  %s0 = atomicrmw add ptr %sleepers.at, i64 1 seq_cst
  %e2 = load atomic i32, ptr %epoch.at seq_cst, align 8
  %seen2 = load i32, ptr %seen.p
  %new2 = icmp ne i32 %e2, %seen2
  br i1 %new2, label %awake, label %wait
wait:
  %e64 = zext i32 %e2 to i64
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %epoch.at, i64 128, i64 %e64, ptr null)
  br label %awake
awake:
  %s1 = atomicrmw sub ptr %sleepers.at, i64 1 seq_cst
  store i64 0, ptr %spins.p
  br label %look
}

define i32 @start_worker(ptr %state) {
entry:
  %id = alloca i64
  %rc = call i32 @pthread_create(ptr %id, ptr null, ptr @worker, ptr %state)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %detach, label %out
detach:
  %tid = load i64, ptr %id
  %rd = call i32 @pthread_detach(i64 %tid)
  br label %out
out:
  ret i32 %rc
}

define void @run_claimed(ptr %state, ptr %header) {
entry:
  %slots = load i64, ptr %header
  %phases.at = getelementptr inbounds i64, ptr %header, i64 1
  %phases = load i64, ptr %phases.at
  %total = mul i64 %slots, %phases
  %team.at = getelementptr inbounds i64, ptr %header, i64 4
  %team = load i64, ptr %team.at
  %busy.at = getelementptr inbounds i64, ptr %state, i64 5
  %pair = cmpxchg ptr %busy.at, i64 0, i64 1 acquire monotonic
  %got = extractvalue { i64, i1 } %pair, 1
  %alone = icmp ule i64 %team, 1
  %not.got = xor i1 %got, true
  %solo = or i1 %alone, %not.got
  br i1 %solo, label %solo.loop, label %publish
solo.loop:
  %c = phi i64 [ 0, %entry ], [ %c.next, %solo.loop ]
  call void @run_cell(ptr %header, i64 %c)
  %c.next = add i64 %c, 1
  %more = icmp ult i64 %c.next, %total
  br i1 %more, label %solo.loop, label %solo.end
solo.end:
  br i1 %got, label %release, label %out
publish:
  %job.at = getelementptr inbounds i64, ptr %state, i64 1
  %done.at = getelementptr inbounds i64, ptr %state, i64 24
  %slots.at = getelementptr inbounds i64, ptr %state, i64 8
  %phases.at.s = getelementptr inbounds i64, ptr %state, i64 9
  %headerint = ptrtoint ptr %header to i64
  store atomic i64 %headerint, ptr %job.at monotonic, align 8
  store atomic i64 %slots, ptr %slots.at monotonic, align 8
  store atomic i64 %phases, ptr %phases.at.s monotonic, align 8
  store atomic i64 0, ptr %done.at monotonic, align 8
  %w = load atomic i64, ptr %state monotonic, align 8
  %g.old = lshr i64 %w, 32
  %g.inc = add i64 %g.old, 1
  %gen = and i64 %g.inc, 4294967295
  %neww = shl i64 %gen, 32
  store atomic i64 %neww, ptr %state seq_cst, align 8
  %epoch.at = getelementptr inbounds i64, ptr %state, i64 16
  %e.old = atomicrmw add ptr %epoch.at, i32 1 seq_cst
  %sleepers.at = getelementptr inbounds i64, ptr %state, i64 17
  %sleepers = load atomic i64, ptr %sleepers.at seq_cst, align 8
  %any = icmp ne i64 %sleepers, 0
  br i1 %any, label %wake, label %own
wake:
  %r = call i64 (i64, ...) @syscall(i64 202, ptr %epoch.at, i64 129, i64 2147483647)
  br label %own
own:
  call void @work(ptr %state, i64 %gen, i64 0)
  call void @wait_done(ptr %done.at, i64 %total)
  br label %release
release:
  store atomic i64 0, ptr %busy.at release, align 8
  br label %out
out:
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
        module = llvm.parse_assembly(_RUNTIME_IR + _RUN_CELL_IR)
        module.verify()
        engine = llvm.create_mcjit_compiler(module, new_target_machine())
        engine.finalize_object()
        address = engine.get_function_address("run_tasks")
    except (RuntimeError, OSError):  # pragma: no cover - a libgomp without the GOMP_parallel entry
        return None
    return engine, ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)


class _ClaimingTeam:
    """The compiled claiming team (`_CLAIM_IR`): its engine, entry points, shared state and workers."""

    def __init__(self, engine: object, run: ctypes._CFuncPtr, start: ctypes._CFuncPtr) -> None:
        self.engine, self._run, self._start = engine, run, start
        self._reset()

    def _reset(self) -> None:
        # int64 0: the claim word (generation << 32 | one bit per claimed cell), 1 the job's table, 5 busy,
        # 6 workers' ids, 7 spin limit, 8 slots, 9 phases; 16 the futex epoch (a cache line of its own, which
        # idle workers watch) and 17 sleepers; 24 cells done (the caller waits on it). Never freed: detached
        # workers read it for the life of the process.
        self.state = np.zeros(32, dtype=np.int64)
        self.state[7] = SPIN_PAUSES
        _KEPT_STATES.append(self.state)
        self.workers = 0
        self.can_start = True  # False once a thread could not be started: the caller runs what is left
        self.pid = os.getpid()

    def run(self, header: np.ndarray, team: int) -> None:
        if self.pid != os.getpid():  # a forked child: the parent's workers are not in it
            self._reset()
        while self.can_start and self.workers < team - 1:
            if self._start(self.state.ctypes.data) != 0:
                self.can_start = False
                break
            self.workers += 1
        self._run(self.state.ctypes.data, header.ctypes.data)


_KEPT_STATES: list[np.ndarray] = []


@functools.cache
def _claiming_team() -> _ClaimingTeam | None:
    """The claiming team compiled for this host, or None (not x86-64, no pthreads)."""
    try:
        module = llvm.parse_assembly(_CLAIM_IR + _RUN_CELL_IR)
        module.verify()
        engine = llvm.create_mcjit_compiler(module, new_target_machine())
        engine.finalize_object()
        pointer = ctypes.c_void_p
        run = ctypes.CFUNCTYPE(None, pointer, pointer)(engine.get_function_address("run_claimed"))
        start = ctypes.CFUNCTYPE(ctypes.c_int, pointer)(engine.get_function_address("start_worker"))
    except (RuntimeError, OSError):  # pragma: no cover - a host without the x86 pause or pthreads
        return None
    return _ClaimingTeam(engine, run, start)


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
    """Whether tables run in compiled code (the claiming team or an OpenMP region; else a Python pool)."""
    return _claiming_team() is not None or _native_runner() is not None


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
            claiming = _claiming_team() if slots * len(self.phases) <= CLAIM_CELLS else None
            if claiming is not None:
                claiming.run(self._header, int(self._header[4]))
                return
            if _native_runner() is None:  # pragma: no cover - claiming team only: every cell here, in order
                self._header[4] = 1
                claiming = _claiming_team()
                claiming.run(self._header, 1)  # type: ignore[union-attr]
                return
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
