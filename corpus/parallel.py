"""Run one picklable function over many items in parallel, with crashes contained: the one seam for scale-out.

Two runners with the same `run(fn, items)` generator:

- `ProcessRunner`: a local process pool. LLVM can abort the whole process on odd IR; when a worker dies, the
  items that were in flight are re-run one by one in a fresh single-worker pool, so the item that kills its
  process is reported as a `TaskFailure` and everything else still gets done.
- `RayRunner`: Ray tasks on a cluster (`address="local"` starts one here). A crashed task fails alone.

Results arrive in completion order as `(item, result_or_TaskFailure)`; callers journal them as they come.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class TaskFailure:
    """An item whose task raised (`kind="error"`) or killed its process (`kind="crash"`)."""

    kind: str
    message: str


class Runner(Protocol):
    workers: int

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]: ...

    def shutdown(self) -> None: ...


def _die_with_parent() -> None:
    """Worker initializer: if the driver is killed, its workers go too instead of computing for nobody."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except Exception as err:  # a task's bug or bad input must not stop the other items
        return TaskFailure("error", f"{type(err).__name__}: {err}")


class ProcessRunner:
    """A local process pool (spawned workers: no LLVM state is inherited through fork)."""

    def __init__(self, workers: int | None = None, window_per_worker: int = 4):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.window = self.workers * window_per_worker
        self._context = multiprocessing.get_context("spawn")

    def shutdown(self) -> None:
        """Nothing to release: each `run` closes its own pool."""

    def _pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=workers, mp_context=self._context, initializer=_die_with_parent
        )

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        pending = iter(items)
        suspects: deque[Any] = deque()
        exhausted = False
        while not exhausted or suspects:
            while suspects:  # after a crash: find the culprit by running each in-flight item alone
                item = suspects.popleft()
                yield item, self._run_alone(fn, item)
            exhausted = yield from self._run_batch(fn, pending, suspects)

    def _run_alone(self, fn: Callable[[Any], Any], item: Any) -> Any:
        pool = self._pool(1)
        try:
            return pool.submit(_call, fn, item).result()
        except BrokenProcessPool:
            return TaskFailure("crash", "the worker process died (LLVM abort or out of memory)")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _run_batch(self, fn: Callable[[Any], Any], pending: Iterator[Any], suspects: deque[Any]):
        """Run items until they run out (returns True) or a worker dies (in-flight items -> suspects)."""
        pool = self._pool(self.workers)
        in_flight: dict[Future, Any] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < self.window:
                    item = next(pending, _END)
                    if item is _END:
                        exhausted = True
                        break
                    in_flight[pool.submit(_call, fn, item)] = item
                if not in_flight:
                    return True
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    try:
                        result = future.result()
                    except BrokenProcessPool:
                        suspects.extend(in_flight.values())
                        return exhausted
                    yield in_flight.pop(future), result
        finally:
            if in_flight:  # the caller stopped early (time limit): do not wait for running tasks at exit
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
            pool.shutdown(wait=False, cancel_futures=True)


_END = object()


class RayRunner:
    """Ray tasks (one CPU each) on the cluster at `address`; "local" starts a private one here."""

    def __init__(self, address: str, window_per_cpu: int = 2):
        import ray

        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, log_to_driver=False)  # "local": a new instance, never a stale one
        self._ray = ray
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.window = self.workers * window_per_cpu

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=0)(_call)
        pending = iter(items)
        in_flight: dict[Any, Any] = {}
        exhausted = False
        while True:
            while not exhausted and len(in_flight) < self.window:
                item = next(pending, _END)
                if item is _END:
                    exhausted = True
                    break
                in_flight[remote.remote(fn, item)] = item
            if not in_flight:
                return
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                item = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as err:  # worker crash or lost node: this item only
                    result = TaskFailure("crash", f"{type(err).__name__}: {str(err)[:300]}")
                yield item, result

    def shutdown(self) -> None:
        """Disconnect from (or, for "local", stop) the Ray cluster this runner connected to."""
        if self._owns_ray:
            self._ray.shutdown()


def make_runner(workers: int | None = None, ray_address: str | None = None) -> Runner:
    """Ray when an address is given (or "local"), else a local process pool."""
    if ray_address:
        return RayRunner(ray_address)
    return ProcessRunner(workers)
