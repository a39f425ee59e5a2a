"""The service's background tuning (`tuning.background`, off by default): while the machine is idle, tune
the recorded units one at a time, so the next build finds their lists without anyone running `optserve tune`.

Idle means the 1-minute load average below `IDLE_LOAD` per CPU: a build (or a burst of requests) raises it
and the tuning waits; a unit already started finishes (a unit is tens of seconds of compiles). The work is
`optserve tune`'s own (tuning/tune.py), on the service's Ray cluster as tasks that reserve no CPU (the
replicas hold the cluster's CPUs) and run at Ray workers' low OS priority. Off on a machine that also
builds: the builds would share their cores with it.

The thread runs in the ingress, which loads no LLVM (tests/contracts/test_ingress_loads_no_llvm.py): every
LLVM step is a task (reads, splits, searches, measurements), and so is the LLVM version the store's
toolchain names, asked of a task once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from optserve.config import Settings
from optserve.objectives import Objective
from optserve.tuning.store import TuningStore
from optserve.tuning.tune import RayTasks, TuneSummary, search_plan, tune

logger = logging.getLogger(__name__)

IDLE_LOAD = 0.5  # the 1-minute load average per CPU under which the machine counts as idle
POLL_S = 30.0  # how often an idle machine is looked for between units
OBJECTIVE = Objective.TEXT_SIZE.value  # optcc's default objective: what builds ask for


def machine_idle(idle_load: float = IDLE_LOAD) -> bool:
    return os.getloadavg()[0] < idle_load * (os.cpu_count() or 1)


class BackgroundTuning:
    """One thread that tunes a recorded unit whenever `idle()` says the machine is idle."""

    def __init__(
        self,
        settings: Settings,
        store: TuningStore,
        idle: Callable[[], bool] = machine_idle,
        poll_s: float = POLL_S,
    ):
        from optserve.engine.coreset import Coreset

        self.store, self.idle, self.poll_s = store, idle, poll_s
        self.max_functions = settings.engine.unit_function_lists_max_functions
        coreset = Coreset.load(settings.engine.coreset_path).first(OBJECTIVE, 10)
        self.plan = search_plan(
            OBJECTIVE,
            settings.tuning.default_budget,
            coreset,
            candidate_timeout_s=settings.compiler.candidate_timeout_s,
            worker_memory_mb=settings.compiler.worker_memory_mb,
        )
        self._tasks: RayTasks | None = None
        self._llvm: str | None = None  # the LLVM version the tasks compile with, as a task reported it
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optserve-background-tuning", daemon=True)

    def start(self) -> BackgroundTuning:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def step(self) -> TuneSummary | None:
        """Tune one recorded unit below the budget if the machine is idle; its summary (None: not idle)."""
        if not self.idle():
            return None
        tasks = self._ray_tasks()
        if self._llvm is None:
            self._llvm = tasks.ray.get(tasks.llvm_version.remote())
        return tune(
            self.store,
            self.plan,
            max_functions=self.max_functions,
            limit_units=1,
            tasks_factory=lambda: tasks,
            llvm=self._llvm,
        )

    def _ray_tasks(self) -> RayTasks:
        if self._tasks is None:
            self._tasks = RayTasks(cpus_per_task=0)
        return self._tasks

    def _run(self) -> None:
        while not self._stopped.wait(self.poll_s):
            try:
                summary = self.step()
            except Exception:  # a failed unit is logged; the service and the next unit go on
                logger.exception("background tuning failed")
                continue
            if summary is not None and summary.units:
                logger.info(
                    "background tuning: %d unit(s), %d functions, %d compiles",
                    summary.units,
                    summary.functions,
                    summary.compiles,
                )
