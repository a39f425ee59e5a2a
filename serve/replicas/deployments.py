"""The back-end Ray Serve deployments, one per resource profile. Each is a thin shell around a plain object.

- `PassOrderingEngine`: one pass-ordering model (GPU when the cluster has one), around `EngineHost`.
- `CompilerWorkers`: a crash-isolated `CompilerPool` of worker processes; autoscaled with the CPU load.
- `LoopTuneScheduler`: LoopTune searches/policy and the kernel backend, one request at a time per replica
  so kernel timings do not disturb each other.

Settings arrive as a plain dict (what a Serve config file can hold) and are validated here.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ray import serve

from optserve.config import Settings
from optserve.deadline import from_wall_time
from optserve.engine.interface import Generation, PromptTooLongError, SamplingOptions
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError, unavailable
from optserve.serve.observability import metrics, tracing
from optserve.serve.observability.logs import configure_replica_logging
from optserve.serve.replicas.engine_host import EngineHost
from optserve.serve.replicas.looptune import schedule

if TYPE_CHECKING:
    from optserve.compiler.interface import Evaluation


@serve.deployment(name="PassOrderingEngine")
class PassOrderingEngine:
    def __init__(self, settings: dict):
        configure_replica_logging()
        config = Settings.model_validate(settings)
        tracing.configure(config.observability, "engine")
        self.host = EngineHost(config.engine, config.compiler)
        self.pending = 0  # calls in this replica now: the engine's queue, as a gauge
        metrics.recorder(*metrics.ENGINE).set(metrics.ENGINE_PENDING, 0)

    async def generate(
        self,
        ir: str,
        options: SamplingOptions,
        feedback: str | None,
        wall_deadline: float | None = None,
        trace: dict | None = None,
    ) -> Generation:
        """The model's candidates by `wall_deadline` (wall-clock time: optserve/deadline.py; time queued
        here counts against it); `trace`: the caller's span (serve/observability/tracing.py carrier)."""
        options = replace(options, deadline=from_wall_time(wall_deadline))
        recorder = metrics.recorder(*metrics.ENGINE)
        outcome = "error"
        self.pending += 1
        recorder.set(metrics.ENGINE_PENDING, self.pending)
        try:
            with tracing.span("engine.generate", trace, strategy=options.strategy.value):
                generation = await self.host.generate(ir, options, feedback)
            outcome = "deadline" if generation.deadline_hit else "ok"
            recorder.count(metrics.ENGINE_TOKENS, generation.tokens_computed)
            return generation
        except PromptTooLongError:
            outcome = "too_long"
            raise
        except ServiceError as err:
            outcome = "unavailable" if err.kind is ErrorKind.UNAVAILABLE else "error"
            raise
        finally:
            self.pending -= 1
            recorder.set(metrics.ENGINE_PENDING, self.pending)
            recorder.count(metrics.ENGINE_GENERATIONS, outcome=outcome)

    def metadata(self) -> schemas.ModelMetadata:
        return self.host.metadata()

    async def check_health(self) -> None:
        """Ray Serve calls this periodically: raising makes it replace this replica (a dead engine)."""
        await self.host.check_health()

    async def __del__(self):
        await self.host.close()


@serve.deployment(name="CompilerWorkers")
class CompilerWorkers:
    def __init__(self, settings: dict):
        from optserve.compiler.workers import CompilerPool

        configure_replica_logging()
        config = Settings.model_validate(settings)
        tracing.configure(config.observability, "compiler")
        compiler = config.compiler
        self.pool = CompilerPool(
            processes=compiler.workers,
            timeout_s=compiler.candidate_timeout_s,
            memory_limit_mb=compiler.worker_memory_mb,
            standby=compiler.standby_workers,
            burst=compiler.burst_workers,
        )
        # the intake's own processes: reading a request's IR never waits for a worker busy compiling
        self.intake = CompilerPool(
            processes=compiler.intake_workers,
            timeout_s=compiler.candidate_timeout_s,
            memory_limit_mb=compiler.worker_memory_mb,
        )

    async def evaluate(
        self,
        ir: str,
        pass_lists: Sequence,
        objective: str,
        want_ir: bool,
        want_object: bool,
        wall_deadline: float | None = None,
        trace: dict | None = None,
    ) -> list[Evaluation]:
        """The pool's evaluations; at the request's deadline (wall-clock: optserve/deadline.py) its
        compiles stop, running or queued, here or in this replica's queue. `trace`: the caller's span (one
        span per batch: serve/observability/tracing.py)."""
        from optserve.compiler.workers import PoolBrokenError

        deadline = from_wall_time(wall_deadline)
        try:
            with tracing.span("compiler.evaluate", trace, candidates=len(pass_lists)):
                evaluations = await self.pool.evaluate_async(
                    ir, pass_lists, objective, want_ir, want_object, deadline
                )
        except PoolBrokenError as err:
            raise unavailable(f"the compiler pool cannot compile ({err}); it is being restarted") from None
        recorder = metrics.recorder(*metrics.COMPILER)
        for outcome, count in Counter(e.outcome for e in evaluations).items():
            recorder.count(metrics.COMPILER_EVALUATIONS, count, outcome=outcome)
        return evaluations

    async def run(
        self, function, args: tuple, wall_deadline: float | None = None, trace: dict | None = None
    ) -> tuple[str, object]:
        """`function(*args)` in one of the intake's worker processes (`CompilerPool.run`, a pool of
        `compiler.intake_workers` apart from the compiling one): the service's IR intake, so an input that
        crashes LLVM ends a worker, never the ingress or the engine. ("value", its value) or
        ("raised", the error: the job's own, StoppedError at the deadline, WorkerCrashedError if the worker
        died), returned rather than raised: a caller's bad IR is an answer here, not a replica error for
        Ray Serve to log with its traceback (handles.CompilerClient raises it in the caller)."""
        from optserve.compiler.workers import PoolBrokenError

        name = getattr(function, "__name__", "job")
        deadline = from_wall_time(wall_deadline)
        try:
            with tracing.span(f"compiler.{name}", trace):
                return "value", await self.intake.run_async(function, *args, deadline=deadline)
        except PoolBrokenError as err:
            raise unavailable(f"the compiler pool cannot run {name} ({err}); it is being restarted") from None
        except Exception as err:  # every error of the job is the caller's to handle
            return "raised", err

    def check_health(self) -> None:
        """Ray Serve calls this periodically: raising makes it replace this replica (a broken pool)."""
        self.pool.check_health()
        self.intake.check_health()

    def __del__(self):
        self.pool.close()
        self.intake.close()


@serve.deployment(name="LoopTuneScheduler")
class LoopTuneScheduler:
    def __init__(self, settings: dict):
        configure_replica_logging()
        self.settings = Settings.model_validate(settings)
        tracing.configure(self.settings.observability, "looptune")

    async def schedule(
        self, request: schemas.ScheduleRequest, wall_deadline: float | None = None, trace: dict | None = None
    ) -> schemas.ScheduleResponse:
        """`wall_deadline`: when the answer must be ready, wall-clock time (optserve/deadline.py); time
        the request waited in this replica's queue counts against it. `trace`: the caller's span."""
        deadline = from_wall_time(wall_deadline)
        with tracing.span("looptune.schedule", trace):
            return await asyncio.to_thread(schedule, request, self.settings, deadline)
