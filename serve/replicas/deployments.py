"""The back-end Ray Serve deployments, one per resource profile. Each is a thin shell around a plain object.

- `PassOrderingEngine`: one pass-ordering model (GPU when the cluster has one), around `ModelEngine`: it
  loads the model, names its version and says why it is not ready.
- `CompilerWorkers`: a crash-isolated `CompilerPool` of worker processes; autoscaled with the CPU load.
- `LoopTuneScheduler`: LoopTune searches/policy and the kernel backend, one request at a time per replica
  so kernel timings do not disturb each other; its Schedule flow (`schedule`: validate the loop nest ->
  search or policy -> response) runs here.

Settings arrive as a plain dict (what a Serve config file can hold) and are validated here.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ray import serve

from optserve.config import Settings, TuningSettings
from optserve.deadline import SEARCH_SHARE, Deadline, from_wall_time
from optserve.engine.backend import DecoderDeadError
from optserve.engine.interface import Generation, PromptTooLongError, SamplingOptions
from optserve.kernels.spec import SpecError
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError, invalid, unavailable
from optserve.serve.observability import metrics, tracing
from optserve.serve.observability.logs import configure_replica_logging

if TYPE_CHECKING:
    from optserve.compiler.interface import Evaluation
    from optserve.engine.engine import ModelEngine
    from optserve.policies.decision_cache import DecisionCache

log = logging.getLogger(__name__)

STRATEGIES = [strategy.value for strategy in schemas.ServedStrategy]


def model_version(model_dir: Path) -> str:
    """Content hash of every file in the model directory: a changed weight or tokenizer changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(model_dir)).encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _platform() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@serve.deployment(name="PassOrderingEngine")
class PassOrderingEngine:
    """The engine replica: one pass-ordering model, or the reason it has none.

    A missing or broken model does not stop the service (LoopTune and health still answer): the replica
    records the reason, reports it in the model metadata and readiness, and Optimize answers UNAVAILABLE with
    it. An engine that dies later (its vLLM process killed, e.g. by the OOM killer) is the same, and more:
    `check_health` fails, so Ray Serve replaces the replica, and the new one loads the model afresh. The
    plain class (`PassOrderingEngine.func_or_class`) runs without Ray: the tests' and the benchmarks' engine.
    """

    def __init__(self, settings: dict):
        configure_replica_logging()
        config = Settings.model_validate(settings)
        tracing.configure(config.observability, "engine")
        self.settings = config.engine
        self.compiler = config.compiler
        self.engine: ModelEngine | None = None
        self.version = ""
        self.reason = ""
        self.dead = False  # the loaded engine died: only a new replica recovers
        self.pending = 0  # calls in this replica now: the engine's queue, as a gauge
        metrics.recorder(*metrics.ENGINE).set(metrics.ENGINE_PENDING, 0)
        self._load(Path(self.settings.model_dir))

    def _load(self, model_dir: Path) -> None:
        if not (model_dir / "profile.json").is_file():
            what = "does not exist" if not model_dir.exists() else "has no profile.json"
            self.reason = (
                f"model directory {model_dir} {what}; set engine.model_dir in the config file to a trained "
                "model (or build a stand-in with `python -m optserve.passlm.tiny_model DIR`)"
            )
            log.warning("pass-ordering model not loaded: %s", self.reason)
            return
        try:
            from optserve.engine.engine import ModelEngine

            self.version = model_version(model_dir)
            options = {"device": _platform()} if self.settings.backend == "torch" else {}
            self.engine = ModelEngine.load(model_dir, self.settings.backend, **options)
        except Exception as err:  # the service keeps answering; the reason is reported to callers
            self.reason = f"loading {model_dir} with the {self.settings.backend} backend failed: {err}"
            log.exception("pass-ordering model not loaded")

    @property
    def model_id(self) -> str:
        return self.engine.model_id if self.engine is not None else Path(self.settings.model_dir).name

    async def generate(
        self,
        ir: str,
        options: SamplingOptions,
        feedback: str | None = None,
        wall_deadline: float | None = None,
        trace: dict | None = None,
    ) -> Generation:
        """The model's candidates by `wall_deadline` (wall-clock time: optserve/deadline.py; time queued
        here counts against it; None: the options' own deadline, as an in-process caller sets it);
        `trace`: the caller's span (serve/observability/tracing.py carrier). PromptTooLongError for a module
        longer than the model's context; UNAVAILABLE while the model is not ready."""
        if wall_deadline is not None:
            options = replace(options, deadline=from_wall_time(wall_deadline))
        recorder = metrics.recorder(*metrics.ENGINE)
        outcome = "error"
        self.pending += 1
        recorder.set(metrics.ENGINE_PENDING, self.pending)
        try:
            with tracing.span("engine.generate", trace, strategy=options.strategy.value):
                generation = await self._generate(ir, options, feedback)
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
        return schemas.ModelMetadata(
            name=self.model_id,
            version=self.version,
            backend=self.settings.backend,
            platform=_platform(),
            ready=self.engine is not None and not self.dead,
            reason=self.reason,
            strategies=STRATEGIES,
            max_samples=self.settings.max_samples,
            max_feedback_rounds=self.settings.max_feedback_rounds,
            max_ir_bytes=self.compiler.max_ir_bytes,
        )

    async def check_health(self) -> None:
        """Ray Serve calls this periodically: raising makes it replace this replica (a dead engine).

        A model that never loaded is not a failure of this replica: a new one would fail the same way, so it
        stays up and says why (metadata, readiness).
        """
        if self.engine is None:
            return
        if not self.dead:
            try:
                await self.engine.check_health()
            except DecoderDeadError as err:
                self._died(err)
        if self.dead:
            raise RuntimeError(self.reason)

    async def _generate(self, ir: str, options: SamplingOptions, feedback: str | None) -> Generation:
        if self.engine is None or self.dead:
            raise unavailable(f"pass-ordering model {self.model_id!r} is not ready: {self.reason}")
        try:
            return await self.engine.generate(ir, options, feedback)
        except DecoderDeadError as err:
            self._died(err)
            raise unavailable(f"pass-ordering model {self.model_id!r} is not ready: {self.reason}") from None

    def _died(self, err: DecoderDeadError) -> None:
        if not self.dead:
            self.dead = True
            self.reason = f"{err}; the {self.settings.backend} engine is being restarted, retry shortly"
            log.error("pass-ordering engine died: %s", err)

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()

    async def __del__(self):
        await self.close()


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
    """The LoopTune replica. Loop kernels are only ever generated from a `LoopNestSpec` that passed
    `LoopNestSpec.parse` (names, sizes and memory limits from the LoopTune settings; no size is refused for
    the search's cost), on the request's threads (default: the deployment's CPUs), with the search time
    bounded by the same settings and, for a gRPC call, by the call's deadline: the search's time limit is cut
    so that the answer is ready by then (the best schedule found in time, `timed_out: true` when the search
    was cut)."""

    def __init__(self, settings: dict):
        from optserve.policies.methods import DEFAULT_METHOD
        from optserve.policies.search import prepare

        configure_replica_logging()
        self.settings = Settings.model_validate(settings)
        tracing.configure(self.settings.observability, "looptune")
        # ready means warm: the default method's network (torch) and the JIT are loaded before the first
        # request, which would otherwise wait a second or more for them
        prepare(DEFAULT_METHOD)
        decision_cache(self.settings.tuning)  # and the tuning store its decisions are kept in is open

    async def schedule(
        self, request: schemas.ScheduleRequest, wall_deadline: float | None = None, trace: dict | None = None
    ) -> schemas.ScheduleResponse:
        """`wall_deadline`: when the answer must be ready, wall-clock time (optserve/deadline.py); time
        the request waited in this replica's queue counts against it. `trace`: the caller's span."""
        deadline = from_wall_time(wall_deadline)
        with tracing.span("looptune.schedule", trace):
            return await asyncio.to_thread(schedule, request, self.settings, deadline)


def time_limit_within(asked_s: float, deadline: Deadline | None, max_s: float) -> float:
    """The search's time limit: `asked_s`, cut to SEARCH_SHARE of what is left before `deadline` (None: no
    deadline). A limit over `max_s` is left as asked, to be refused as such; a deadline
    already passed is DEADLINE_EXCEEDED before any work (the caller is gone)."""
    if deadline is None or asked_s > max_s:
        return asked_s
    if deadline.passed():
        raise ServiceError(ErrorKind.DEADLINE_EXCEEDED, "the call's deadline passed before the search began")
    return min(asked_s, deadline.share(SEARCH_SHARE).remaining_s())


_decision_caches: dict[str, DecisionCache] = {}  # by the tuning store's location, one each per process
_decision_caches_lock = threading.Lock()


def decision_cache(tuning: TuningSettings) -> DecisionCache:
    """Where this process keeps LoopTune's decisions: its memory over the service's tuning store (the one
    the ingress opens, `tuning.lookup.open_service_store`: `tuning.store_url`, else the user's cache
    directory), so that a shape decided by any replica, before or after a restart, is answered without
    search; the store is opened once per process (`LoopTuneScheduler` opens it as it starts). The memory
    alone with a tuning profile (a read-only store of pass lists: it holds no decisions) or a store that
    cannot be opened (logged once, by `open_service_store`)."""
    from optserve.policies.decision_cache import LayeredDecisionCache, shared_decision_cache

    memory = shared_decision_cache()
    if tuning.profile is not None:
        return memory
    from optserve.tuning.store import default_store_path

    where = tuning.store_url or str(default_store_path())
    with _decision_caches_lock:
        if where not in _decision_caches:
            from optserve.tuning.lookup import open_service_store

            store = open_service_store(tuning)
            _decision_caches[where] = memory if store is None else LayeredDecisionCache(store, memory)
        return _decision_caches[where]


def schedule(
    request: schemas.ScheduleRequest, settings: Settings, deadline: Deadline | None = None
) -> schemas.ScheduleResponse:
    """Choose a schedule for the request's loop nest (blocking: run it off the event loop), done by
    `deadline` if one is given (the gRPC call's, less what its answer needs to get back)."""
    from optserve.policies.scheduler import default_time_limit_s, schedule_contraction

    limits = settings.looptune
    asked_s = request.time_limit_s or default_time_limit_s(limits)
    time_limit_s = time_limit_within(asked_s, deadline, limits.search_time_limit_s)
    try:
        result = schedule_contraction(
            request.einsum,
            request.sizes,
            limits,
            method=request.method,
            time_limit_s=time_limit_s,
            measure=request.measure,
            emit_ir=request.return_kernel,
            threads=request.threads,
            cache=decision_cache(settings.tuning),  # a repeated shape is answered without search
        )
    except SpecError as err:
        raise invalid(str(err)) from None
    return schemas.ScheduleResponse(
        schedule=result.schedule,
        loops=[schemas.Loop(**loop) for loop in result.loops],
        actions=result.actions,
        gflops=result.gflops or 0.0,
        base_gflops=result.base_gflops or 0.0,
        measured=result.gflops is not None,
        seconds=result.seconds,
        method=result.method,
        kernel_ir=result.llvm_ir,
        timed_out=result.timed_out,
        evaluations=result.evaluations,
        threads=result.threads,
        timed_sizes=result.timed_sizes or {},
        cached=result.cached,
    )
