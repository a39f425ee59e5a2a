"""Crash-isolated candidate evaluation: a pool of worker processes, each compiling one candidate at a time.

LLVM aborts the whole process on some IR and pass combinations, and a pass can loop for a long time. Every
candidate therefore runs in a worker process with a wall-clock limit. A worker that dies (abort, segfault,
killed) or overruns the limit yields an error `Evaluation` for that candidate and is replaced by a fresh
process; the pool keeps working. Workers are plain subprocesses talking over a socket, so the pool runs
where Ray is absent; a Ray Serve deployment can own one.

Threads and asyncio: `evaluate` is thread-safe. Concurrent callers share the workers: each call takes idle
workers as it needs them and gives them back when its candidates are done. From asyncio, use
`await pool.evaluate_async(...)`, which runs `evaluate` in a thread.

Deadlines: a call may carry the request's deadline (`optserve.deadline.Deadline`) and may be given up (its
caller cancelled). From then on no candidate of the call starts, and the compiles it has running are stopped:
LLVM cannot be interrupted inside a pass, so their workers are killed and restarted in the background
(~0.15 s each on an idle machine, seconds on a loaded one), and the call returns at once. No worker or
thread stays busy with work nobody will read.

Workers leave nothing behind: each runs with `RLIMIT_CORE` 0 (an LLVM abort writes no core file)
and, on Linux, a parent-death signal (SIGKILL once the process that started it is gone, e.g. its replica
SIGKILLed), so an orphaned worker does not keep compiling. Every worker is started from one long-lived
thread of the parent (`_Spawner`): the kernel sends that signal when the *thread* that started the child
ends, and workers are replaced from short-lived threads.

Jobs besides candidates (`run`, `run_async`): any function of the compiler that reads user input with LLVM
(the service's intake: parse and verify, split, the tuning store's keys) runs in a worker too, with the same
wall-clock limit, deadline and restart, so an input that crashes LLVM ends one worker, never the ingress or
the engine that asked (`WorkerCrashedError`).

Standby workers (`standby`, default none): processes started and ready but idle, outside the pool's
`processes`. A worker stopped or lost (deadline, crash, overrun) is replaced by a standby one at once, and a
new standby starts in the background, so the next call does not wait for a process start.

Burst workers (`burst`, default none): up to `burst` more compiling processes, used only while every one of
the pool's `processes` is busy, so that a job arriving during a compile runs beside it instead of waiting in
the queue (a replica reserves a Ray CPU per worker, none per burst process: a 2-core machine has one worker,
and a build under make -j2 asks for two units at once). A call with more candidates than free workers takes a
burst process too. They start lazily: the first job that finds every worker busy
starts one in the background and takes whichever comes first, a worker freed or the burst process ready, so
an idle pool holds no burst process until a first overflow. A burst process runs a job exactly as a worker
does (time limit, memory limit, deadline, crash isolation, kill and reap); one stopped or lost is reaped and
not replaced by a standby, which stays the workers'; the next overflow starts its successor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import pickle
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from optserve.compiler.cost import Objective
from optserve.compiler.function_lists import FunctionLists, apply_function_lists
from optserve.compiler.interface import (
    LLVM_SAYS,
    CandidateCompiler,
    CompileJob,
    Evaluation,
    Outcome,
    WorkerCrashedError,
)
from optserve.compiler.pipeline import evaluate
from optserve.deadline import Deadline, StoppedError

_START_TIMEOUT_S = 120.0
# How often a job waiting for a worker looks whether a burst process is free (only while the pool has burst).
_BURST_POLL_S = 0.005
T = TypeVar("T")


# How the pool's own error Evaluations begin (their `outcome` tells them from compiler errors).
CRASHED = "compiler worker crashed"
TIMED_OUT = "timed out"
NOT_STARTED = "not compiled: the caller gave up before this candidate started"
STOPPED = "stopped: the caller gave up while this candidate compiled"
# A candidate cut by the call's deadline (outcome DEADLINE), and a job stopped by it (StoppedError).
DEADLINE_PASSED = "deadline passed"
DEADLINE_NOT_STARTED = f"{DEADLINE_PASSED}: not compiled, the deadline came before this candidate started"
DEADLINE_STOPPED = f"{DEADLINE_PASSED}: stopped while compiling"
# A failed assertion as glibc reports it (LLVM built with assertions), the file and the condition taken:
# "python: /path/File.cpp:249: bool f(...): Assertion `x < 1000 && "why"' failed."
_ASSERTION = re.compile(r"(?P<file>[\w.+-]+\.(?:cpp|h|c|inc)):\d+: .*Assertion `(?P<condition>.*)' failed")
# How often a call whose caller may give up checks for it while its candidates compile.
GIVEN_UP_POLL_S = 0.05


class PoolBrokenError(RuntimeError):
    """The pool could not restart a worker process: it has fewer workers than it needs (or none)."""


_PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal this process gets when its parent (thread) ends


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process once its parent is gone (Linux; elsewhere nothing is set), and
    exit now if the parent `parent_pid` is gone already (it died before the signal was asked for)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            sys.stderr.write(f"compiler worker: prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}\n")
    if os.getppid() != parent_pid:
        os._exit(1)


@dataclass(frozen=True)
class _Job:
    """A task for a worker besides candidates: `function(*args)`, its value or exception sent back."""

    function: Callable[..., Any]
    args: tuple


def _run_job(job: _Job) -> tuple[str, Any]:
    try:
        return "value", job.function(*job.args)
    except Exception as err:  # the caller's to raise: the exception itself when it pickles
        try:
            pickle.dumps(err)
        except Exception:
            err = RuntimeError(f"{type(err).__name__}: {err}")
        return "raised", err


def _worker_main(connection: Connection, memory_limit_bytes: int | None, parent_pid: int) -> None:
    """Worker loop: answer each task, a `_Job` or a candidate (ir_key, ir or None, pass list, objective,
    want_ir, want_object)."""
    import resource

    # LLVM loads before "ready" (the compiler's modules import it only where they call it): a job's time is
    # its own, not the library's load, and the address-space limit below applies to a process that holds it
    import llvmlite.binding  # noqa: F401

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _die_with_parent(parent_pid)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # an abort on some IR writes no core file
    if memory_limit_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    connection.send("ready")
    current_key, current_ir = None, None
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        if task is None:
            return
        if isinstance(task, _Job):
            connection.send(_run_job(task))
            continue
        ir_key, ir, pass_list, objective, want_ir, want_object = task
        if ir is not None:
            current_key, current_ir = ir_key, ir
        assert ir_key == current_key, "the parent sends the IR whenever it changes"
        # A FunctionLists candidate is a whole unit with a list per function (one job, like a pass list).
        run = apply_function_lists if isinstance(pass_list, FunctionLists) else evaluate
        connection.send(run(current_ir, pass_list, objective, want_ir=want_ir, want_object=want_object))


class _Spawner:
    """The one thread of this process that starts worker processes (`popen`), alive as long as the process.

    A worker's parent-death signal fires when the thread that started it ends (prctl(2)), not the process:
    workers started from the pool's short-lived threads (replacements, standby refills) would be killed when
    those threads return. This thread never returns, so the signal means the process is gone."""

    _lock = threading.Lock()
    _requests: queue.SimpleQueue | None = None
    _pid: int | None = None  # the process whose thread runs now (a forked child starts its own)

    @classmethod
    def popen(cls, command: list[str], **options) -> subprocess.Popen:
        with cls._lock:
            if cls._requests is None or cls._pid != os.getpid():
                cls._requests, cls._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(
                    target=cls._serve, args=(cls._requests,), name="compiler-worker-spawner", daemon=True
                ).start()
            requests = cls._requests
        started: concurrent.futures.Future[subprocess.Popen] = concurrent.futures.Future()
        requests.put((command, options, started))
        return started.result()

    @staticmethod
    def _serve(requests: queue.SimpleQueue) -> None:
        while True:
            command, options, started = requests.get()
            try:
                started.set_result(subprocess.Popen(command, **options))
            except BaseException as err:  # handed to the caller, which raises it
                started.set_exception(err)


class _Worker:
    """One worker process, started as `python -m optserve.compiler.workers FD MEMORY PARENT` with a socket to
    talk over (MEMORY: its address-space limit in bytes, 0 for none; PARENT: this process's pid).

    A fresh interpreter (not fork) keeps the parent's threads, locks and main module out of the worker.
    """

    def __init__(self, memory_limit_bytes: int | None):
        parent_end, child_end = socket.socketpair()
        command = [
            sys.executable,
            "-m",
            "optserve.compiler.workers",
            str(child_end.fileno()),
            str(memory_limit_bytes or 0),
            str(os.getpid()),
        ]
        # LLVM says why it aborts on stderr ("LLVM ERROR: ..."): kept in a file, so a crash can say it.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the worker lives)
        try:
            self.process = _Spawner.popen(
                command, pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, stderr=self.stderr
            )
        finally:
            child_end.close()
        self.connection = Connection(parent_end.detach())
        self.pid = self.process.pid
        self.ir_key: str | None = None
        self.busy = False
        self.burst = False  # a burst process (CompilerPool's `burst`), not one of the pool's `processes`

    def wait_ready(self) -> None:
        try:
            ready = self.connection.poll(_START_TIMEOUT_S) and self.connection.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            status = self.process.poll()
            raise PoolBrokenError(f"a compiler worker process did not start (exit status {status})")

    def stop(self) -> None:
        try:
            self.connection.send(None)
            self.process.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.stderr.close()
        self.connection.close()

    def exit_description(self) -> str:
        """How the process ended, and what LLVM said before (after LLVM_SAYS), if anything."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped responding"
        said = self.last_words()
        said = f"; {LLVM_SAYS}{said}" if said else ""
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}{said}"
        return f"exited with status {code}{said}"

    def last_words(self) -> str:
        """LLVM's last error message on the worker's stderr ("" if none): a fatal error ("LLVM ERROR: ..."),
        a diagnostic ("error: ...") or a failed assertion; that stderr is passed on to ours."""
        try:
            self.stderr.seek(0, 2)
            self.stderr.seek(max(0, self.stderr.tell() - 2000))
            tail = self.stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""
        if tail.strip():
            sys.stderr.write(tail)
        fatal = []
        for line in tail.splitlines():
            if line.startswith(("LLVM ERROR", "error: ")):
                fatal.append(line.strip())
            elif assertion := _ASSERTION.search(line):
                fatal.append(f"assertion failed in {assertion['file']}: {assertion['condition']}")
        return fatal[-1][:300] if fatal else ""


class CompilerPool(CandidateCompiler):
    """`processes` worker processes evaluating candidates, each within `timeout_s` seconds of wall time,
    `standby` more started and idle to replace a worker stopped or lost without waiting, and up to `burst`
    more started on demand, compiling only while all `processes` are busy."""

    def __init__(
        self,
        processes: int,
        timeout_s: float,
        memory_limit_mb: int | None = None,
        standby: int = 0,
        burst: int = 0,
    ):
        if processes < 1:
            raise ValueError("a compiler pool needs at least one process")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if standby < 0:
            raise ValueError("standby must not be negative")
        if burst < 0:
            raise ValueError("burst must not be negative")
        self.processes = processes
        self.burst = burst
        self.timeout_s = timeout_s
        self._memory_limit_bytes = memory_limit_mb * 1024 * 1024 if memory_limit_mb else None
        self._lock = threading.Lock()
        self._closed = False
        self._workers: set[_Worker] = set()
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._standby: list[_Worker] = []  # started and ready, not among the workers until one is lost
        self._restarting = 0  # workers stopped whose successors have not been started yet
        self._burst: set[_Worker] = set()  # burst processes alive (idle, busy or not yet ready)
        self._burst_idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._burst_starting = 0  # burst processes being started (counted against `burst`)
        self.replaced_workers = 0
        started = [self._start_worker() for _ in range(processes)]
        spares = [_Worker(self._memory_limit_bytes) for _ in range(standby)]
        for worker in started:
            worker.wait_ready()
            self._idle.put(worker)
        for worker in spares:
            worker.wait_ready()
            self._standby.append(worker)

    def _start_worker(self) -> _Worker:
        worker = _Worker(self._memory_limit_bytes)
        with self._lock:
            self._workers.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        """A fresh process in the place of `worker` (killed): a standby one if ready, else one started now;
        a burst process's successor is a burst process started now (the standby is the workers')."""
        worker.kill()
        if worker.burst:
            return self._replace_burst(worker)
        with self._lock:
            standby = self._swap_out(worker)
        if standby is not None:
            return standby
        fresh = self._start_worker()
        try:
            fresh.wait_ready()
        except PoolBrokenError:
            with self._lock:
                self._workers.discard(fresh)
            raise
        return fresh

    def _replace_burst(self, stopped: _Worker) -> _Worker:
        """A burst process started now in the place of `stopped` (killed), for the call that holds it."""
        with self._lock:
            self._burst.discard(stopped)
            self.replaced_workers += 1
            self._burst_starting += 1
        try:
            fresh = _Worker(self._memory_limit_bytes)
            fresh.burst = True
            fresh.wait_ready()
        finally:
            with self._lock:
                self._burst_starting -= 1
        with self._lock:
            self._burst.add(fresh)
        return fresh

    def _start_burst(self) -> None:
        """(In a thread.) Start a burst process and make it idle once ready, for whichever job takes it."""
        try:
            fresh = _Worker(self._memory_limit_bytes)
        except Exception:  # noqa: BLE001 (no process: the pool works on without it)
            with self._lock:
                self._burst_starting -= 1
            return
        fresh.burst = True
        try:
            fresh.wait_ready()
        except PoolBrokenError:  # the pool works on without it; the next overflow tries again
            with self._lock:
                self._burst_starting -= 1
            return
        with self._lock:
            self._burst_starting -= 1
            if not self._closed:
                self._burst.add(fresh)
                self._burst_idle.put(fresh)
                return
        fresh.stop()

    def _reap_burst(self, stopped: _Worker) -> None:
        """(Lock held.) `stopped`, a burst process killed, leaves the pool; a thread reaps it. The next
        overflow starts its successor."""
        self._burst.discard(stopped)
        self.replaced_workers += 1
        threading.Thread(target=stopped.kill, daemon=True).start()

    def _take_burst(self) -> _Worker | None:
        """An idle burst process, if one is ready; else start one (in the background) if fewer than `burst`
        are alive, and return None."""
        while True:
            try:
                worker = self._burst_idle.get(block=False)
            except queue.Empty:
                break
            if worker.process.poll() is None:
                return worker
            with self._lock:  # died while idle (killed from outside): reaped, the next one is tried
                self._reap_burst(worker)
        with self._lock:
            if self._closed or len(self._burst) + self._burst_starting >= self.burst:
                return None
            self._burst_starting += 1
        threading.Thread(target=self._start_burst, name="compiler-burst-start", daemon=True).start()
        return None

    def _give_back(self, worker: _Worker) -> None:
        worker.busy = False
        (self._burst_idle if worker.burst else self._idle).put(worker)

    def burst_worker_pids(self) -> list[int]:
        """Burst processes alive now (started on the first overflow)."""
        with self._lock:
            return sorted(worker.pid for worker in self._burst)

    def _swap_out(self, stopped: _Worker) -> _Worker | None:
        """(Lock held.) `stopped`, killed, leaves the workers; a ready standby worker takes its place if
        there is one (returned; None: none), and a thread reaps `stopped` and starts a successor standby."""
        self._workers.discard(stopped)
        self.replaced_workers += 1
        reap = [stopped]
        while self._standby and not self._closed:
            standby = self._standby.pop()
            if standby.process.poll() is None:
                self._workers.add(standby)
                threading.Thread(target=self._refill_standby, args=(reap,), daemon=True).start()
                return standby
            reap.append(standby)  # died while on standby (killed from outside): try the next one
        if len(reap) > 1:
            threading.Thread(target=self._refill_standby, args=(reap[1:],), daemon=True).start()
        return None

    def _refill_standby(self, reap: list[_Worker]) -> None:
        """Reap the killed workers `reap`, then start a standby worker and keep it ready (until close)."""
        for worker in reap:
            worker.kill()
        if self._closed:
            return
        fresh = _Worker(self._memory_limit_bytes)
        try:
            fresh.wait_ready()
        except PoolBrokenError:  # the pool works on without it; the next loss restarts as without standby
            return
        with self._lock:
            if not self._closed:
                self._standby.append(fresh)
                return
        fresh.stop()

    def standby_workers(self) -> int:
        """Standby workers ready now."""
        with self._lock:
            return len(self._standby)

    def check_health(self) -> None:
        """Raise `PoolBrokenError` if the pool can no longer evaluate (closed, or a worker it could not
        restart: calls would wait for a worker that never comes)."""
        if self._closed:
            raise PoolBrokenError("the compiler pool is closed")
        self._replace_dead_idle()
        with self._lock:
            workers = len(self._workers) + self._restarting
        if workers < self.processes:
            missing = self.processes - workers
            raise PoolBrokenError(f"{missing} of {self.processes} compiler workers could not restart")

    def _replace_dead_idle(self) -> None:
        """Reap and replace the idle workers and burst processes that died from outside (an operator's or the
        OOM killer's SIGKILL) now, not when a call next takes one: until then each stays a zombie child of
        the replica and its place in the pool stays empty. check_health (every few seconds in the service)
        runs this; a standby worker that died is reaped here and skipped when a swap reaches it."""
        for idle in (self._idle, self._burst_idle):
            alive = []
            while True:
                try:
                    worker = idle.get(block=False)
                except queue.Empty:
                    break
                if worker.process.poll() is None:
                    alive.append(worker)
                else:
                    self._restart_in_background(worker)
            for worker in alive:
                idle.put(worker)
        with self._lock:
            standby = list(self._standby)
        for worker in standby:
            worker.process.poll()

    def worker_pids(self) -> list[int]:
        with self._lock:
            return sorted(worker.pid for worker in self._workers)

    def busy_worker_pids(self) -> list[int]:
        """Workers and burst processes compiling a candidate or running a job right now (for monitoring,
        and for tests that kill one)."""
        with self._lock:
            return sorted(worker.pid for worker in self._workers | self._burst if worker.busy)

    def evaluate(
        self,
        ir: str | bytes,
        pass_lists: Sequence[Sequence[str] | FunctionLists],
        objective: Objective | str,
        want_ir: bool = False,
        want_object: bool = False,
        given_up: threading.Event | None = None,
        deadline: Deadline | None = None,
    ) -> list[Evaluation]:
        """Evaluate every pass list (or FunctionLists, for a whole unit) on `ir` in parallel; results in
        the order of `pass_lists`.

        A candidate whose worker crashes or overruns `timeout_s` gets an Evaluation with `error` set. At
        `deadline` the call ends: candidates not yet started get a DEADLINE_NOT_STARTED error, running
        ones are stopped (DEADLINE_STOPPED; their workers restart in the background), both of outcome
        DEADLINE. Once `given_up` is set (the caller stopped waiting) it ends the same way, with NOT_STARTED
        and STOPPED. `ir`: IR text as `parse_ir` gives it, or a unit's bytes as a client sent them (read in
        the worker: `compiler.ir.compile_input`).
        """
        if self._closed:
            raise PoolBrokenError("the compiler pool is closed")
        objective = Objective(objective)
        ir_key = hashlib.sha256(ir if isinstance(ir, bytes) else ir.encode()).hexdigest()
        candidates = [p if isinstance(p, FunctionLists) else tuple(p) for p in pass_lists]
        pending = deque(range(len(candidates)))
        results: list[Evaluation | None] = [None] * len(candidates)
        running: dict[Connection, tuple[_Worker, int, float]] = {}  # worker, candidate, when it started
        spare: list[_Worker] = []  # workers this call holds but is not using right now

        def dispatch(worker: _Worker) -> None:
            if worker.process.poll() is not None:  # died while idle (e.g. killed from outside)
                worker = self._replace(worker)
            index = pending.popleft()
            send_ir = ir if worker.ir_key != ir_key else None
            worker.ir_key = ir_key
            worker.busy = True
            running[worker.connection] = (worker, index, time.monotonic())
            with contextlib.suppress(OSError):  # a dead worker's closed socket reports the crash in _collect
                worker.connection.send((ir_key, send_ir, candidates[index], objective, want_ir, want_object))

        def cut() -> tuple[str, str, Outcome] | None:
            """(not-started error, stopped error, their outcome) once the call must end, else None."""
            if given_up is not None and given_up.is_set():
                return NOT_STARTED, STOPPED, Outcome.ERROR  # nobody reads them: the caller is gone
            if deadline is not None and deadline.passed():
                return DEADLINE_NOT_STARTED, DEADLINE_STOPPED, Outcome.DEADLINE
            return None

        try:
            while pending or running:
                if ending := cut():
                    not_started, stopped, outcome = ending
                    for index in pending:
                        results[index] = Evaluation(
                            candidates[index], None, not_started, 0.0, outcome=outcome
                        )
                    pending.clear()
                    now = time.monotonic()
                    for worker, index, started in running.values():
                        results[index] = Evaluation(
                            candidates[index], None, stopped, now - started, outcome=outcome
                        )
                        self._restart_in_background(worker)
                    running.clear()
                    break
                while pending:
                    worker = (
                        spare.pop()
                        if spare
                        else self._take_idle(self._idle_wait(running, given_up, deadline))
                    )
                    if worker is None:
                        break
                    dispatch(worker)
                if running:
                    self._collect(running, candidates, results, spare, self._wake_by(given_up, deadline))
        finally:
            for worker, _, _ in running.values():  # interrupted: those results will never be read
                self._restart_in_background(worker)
            for worker in spare:
                self._give_back(worker)
        return results  # type: ignore[return-value]

    async def evaluate_async(
        self,
        ir: str | bytes,
        pass_lists: Sequence[CompileJob],
        objective: Objective | str,
        want_ir: bool = False,
        want_object: bool = False,
        deadline: Deadline | None = None,
    ) -> list[Evaluation]:
        """`evaluate` without blocking the event loop. Cancelling it (a deadline, a caller that went away)
        stops the call's candidates, running or not: a cut request does not keep the workers busy."""
        given_up = threading.Event()
        try:
            return await asyncio.to_thread(
                self.evaluate, ir, pass_lists, objective, want_ir, want_object, given_up, deadline
            )
        except asyncio.CancelledError:
            given_up.set()
            raise

    def run(
        self,
        function: Callable[..., T],
        *args,
        given_up: threading.Event | None = None,
        deadline: Deadline | None = None,
    ) -> T:
        """`function(*args)` in a worker (see `CandidateCompiler.run_async`), within the pool's `timeout_s`.
        A worker still running it at the deadline, at the time limit or once `given_up` is set is killed and
        restarted in the background (StoppedError); one that died is replaced (WorkerCrashedError)."""
        if self._closed:
            raise PoolBrokenError("the compiler pool is closed")
        what = getattr(function, "__name__", "a job")
        worker = None
        while worker is None:
            if given_up is not None and given_up.is_set():
                raise StoppedError(f"{what}: the caller gave up before a compiler worker was free")
            if deadline is not None and deadline.passed():
                raise StoppedError(f"{DEADLINE_PASSED}: no compiler worker was free for {what}")
            worker = self._take_idle(self._idle_wait({}, given_up, deadline))
        if worker.process.poll() is not None:  # died while idle (e.g. killed from outside)
            worker = self._replace(worker)
        worker.busy = True
        finished = False
        try:
            with contextlib.suppress(OSError):  # a dead worker's closed socket shows as a crash below
                worker.connection.send(_Job(function, args))
            if cut := self._wait_for_job(worker, given_up, deadline):
                raise StoppedError(f"{DEADLINE_PASSED}: {what} was stopped at {cut}")
            try:
                kind, value = worker.connection.recv()
            except (EOFError, OSError):
                raise self._job_crash(worker, what) from None
            finished = True
        finally:
            if finished:
                self._give_back(worker)
            else:  # stopped, crashed or interrupted: the worker is replaced (a crashed one is dead already)
                self._restart_in_background(worker)
        if kind == "raised":
            raise value
        return value

    def _wait_for_job(self, worker: _Worker, given_up: threading.Event | None, deadline: Deadline | None):
        """Wait until the worker answers (or dies): None; or what cut the job first ("the deadline", "its
        time limit", "the caller's request")."""
        due = time.monotonic() + self.timeout_s
        while True:
            wake = self._wake_by(given_up, deadline)
            wait_until = due if wake is None else min(due, wake)
            if worker.connection.poll(max(0.0, wait_until - time.monotonic())):
                return None
            now = time.monotonic()
            if given_up is not None and given_up.is_set():
                return "the caller's request"
            if deadline is not None and now >= deadline.at:
                return "the deadline"
            if now >= due:
                return f"its time limit ({self.timeout_s:g} s)"

    @staticmethod
    def _job_crash(worker: _Worker, what: str) -> WorkerCrashedError:
        try:
            code = worker.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        said = worker.last_words()
        signal_name = signal.Signals(-code).name if code is not None and code < 0 else ""
        ended = f"was killed by {signal_name}" if signal_name else f"exited with status {code}"
        message = f"{CRASHED}: the process {ended} while running {what}"
        if said:
            message += f"; {LLVM_SAYS}{said}"
        return WorkerCrashedError(message, said, signal_name)

    async def run_async(self, function: Callable[..., T], *args, deadline: Deadline | None = None) -> T:
        """`run` without blocking the event loop; cancelling it stops the job (its worker restarts)."""
        given_up = threading.Event()
        try:
            return await asyncio.to_thread(self.run, function, *args, given_up=given_up, deadline=deadline)
        except asyncio.CancelledError:
            given_up.set()
            raise

    def idle_workers(self) -> int:
        """Workers ready for a call now (all `processes` of them once no call runs and restarts are done)."""
        return self._idle.qsize()

    @staticmethod
    def _wake_by(given_up: threading.Event | None, deadline: Deadline | None) -> float | None:
        """When (a `time.monotonic()` instant) a waiting call must look again whether it is cut (None: only
        its own events wake it)."""
        wake = None if deadline is None else deadline.at
        if given_up is not None:  # an Event cannot be waited on with the sockets: poll it
            poll = time.monotonic() + GIVEN_UP_POLL_S
            wake = poll if wake is None else min(wake, poll)
        return wake

    def _idle_wait(self, running, given_up, deadline) -> float | None:
        """Seconds to wait for an idle worker: none while the call has candidates running (it collects
        them instead), else until the call may be cut (None: as long as it takes)."""
        if running:
            return 0.0
        wake = self._wake_by(given_up, deadline)
        return None if wake is None else max(0.0, wake - time.monotonic())

    def _take_idle(self, wait_s: float | None) -> _Worker | None:
        """An idle worker, else an idle burst process (one is started if none is alive), waiting up to
        `wait_s` seconds (None: as long as it takes) for whichever comes first."""
        if not self.burst:
            try:
                if wait_s is not None and wait_s <= 0:
                    return self._idle.get(block=False)
                return self._idle.get(timeout=wait_s)
            except queue.Empty:
                return None
        until = None if wait_s is None else time.monotonic() + wait_s
        while True:
            with contextlib.suppress(queue.Empty):
                return self._idle.get(block=False)
            if (worker := self._take_burst()) is not None:
                return worker
            left = _BURST_POLL_S if until is None else min(_BURST_POLL_S, until - time.monotonic())
            if left <= 0:
                return None
            with contextlib.suppress(queue.Empty):
                return self._idle.get(timeout=left)

    def _restart_in_background(self, worker: _Worker) -> None:
        """Kill a worker whose compile nobody will read; a thread reaps it and starts its successor, which
        joins the idle workers once it is ready. The caller is not held up: on a loaded machine a restart
        takes up to seconds (~0.15 s on an idle one)."""
        with contextlib.suppress(OSError):
            worker.process.kill()  # at once: the reaping waits in the thread
        if worker.burst:
            with self._lock:
                self._reap_burst(worker)
            return
        with self._lock:
            standby = self._swap_out(worker)
            if standby is None:
                self._restarting += 1  # counted as a worker by check_health until its successor is started
        if standby is not None:
            self._idle.put(standby)
            return
        threading.Thread(target=self._restart, args=(worker,), daemon=True).start()

    def _restart(self, worker: _Worker) -> None:
        worker.kill()
        fresh = None if self._closed else self._start_worker()
        with self._lock:
            self._restarting -= 1
        if fresh is None:
            return
        try:
            fresh.wait_ready()
        except PoolBrokenError:  # check_health reports the missing worker
            with self._lock:
                self._workers.discard(fresh)
            return
        if self._closed:
            fresh.stop()
        else:
            self._idle.put(fresh)

    def _collect(self, running, candidates, results, spare, wake_by: float | None = None) -> None:
        """Wait for the next finished, crashed or overdue candidate and record its Evaluation (at most
        until `wake_by`, so that a deadline or a caller giving up is noticed soon)."""
        due = min(started + self.timeout_s for _, _, started in running.values())
        wait_until = due if wake_by is None else min(due, wake_by)
        # A worker that dies closes its socket, which makes the connection ready (and recv fail).
        for connection in wait(list(running), timeout=max(0.0, wait_until - time.monotonic())):
            worker, index, _ = running.pop(connection)
            try:
                results[index] = connection.recv()
                worker.busy = False
                spare.append(worker)
            except (EOFError, OSError):
                message = self._crash_message(worker)
                results[index] = Evaluation(candidates[index], None, message, 0.0, outcome=Outcome.CRASH)
                spare.append(self._replace(worker))
        now = time.monotonic()
        for connection in [c for c, (_, _, started) in running.items() if started + self.timeout_s <= now]:
            worker, index, _ = running.pop(connection)
            message = f"{TIMED_OUT}: compiling took longer than {self.timeout_s:g} s"
            results[index] = Evaluation(
                candidates[index], None, message, self.timeout_s, outcome=Outcome.TIMEOUT
            )
            spare.append(self._replace(worker))

    @staticmethod
    def _crash_message(worker: _Worker) -> str:
        return f"{CRASHED}: the process {worker.exit_description()} while compiling this candidate"

    def close(self) -> None:
        """Stop all workers. Calls to `evaluate` must have returned."""
        self._closed = True
        with self._lock:
            workers, self._workers = list(self._workers), set()
            workers += self._standby
            self._standby = []
            workers += self._burst
            self._burst = set()
        for worker in workers:
            worker.stop()

    def __enter__(self) -> CompilerPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


if __name__ == "__main__":
    # the loop of the module under its own name: a `_Job` the parent pickled is optserve.compiler.workers'
    from optserve.compiler import workers

    _fd, _memory_limit, _parent = (int(arg) for arg in sys.argv[1:4])
    workers._worker_main(Connection(_fd), _memory_limit or None, _parent)
