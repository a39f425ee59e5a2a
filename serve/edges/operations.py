"""The service's operations, shared by gRPC (serve/edges/grpc_methods.py) and HTTP (serve/edges/http_app.py
routes).

An edge runs each request's work inside `record`, a context manager: the request is counted and timed
(serve/observability/metrics.py), its access line written with the request id (serve/observability/logs.py),
traced as the root span of its trace (serve/observability/tracing.py), and any failure turned into the
`ServiceError` the caller sees.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from optserve.compiler.cache import ResultCache
from optserve.config import Settings
from optserve.deadline import Deadline
from optserve.serve import schemas
from optserve.serve.observability import metrics, tracing
from optserve.serve.observability.logs import access_fields, log_access, start_access
from optserve.serve.optimize.optimizer import Optimizer
from optserve.serve.replicas.handles import CompilerClient, EngineClient, LoopTuneClient, as_service_error
from optserve.serve.replicas.readiness import deployment_statuses, readiness

# How long a starting ingress replica waits for its warm-up (`Operations.warm`): the compiler and engine
# replicas start beside it, on a loaded 2-core machine in tens of seconds.
WARM_TIMEOUT_S = 120.0


class Operations:
    def __init__(
        self,
        settings: Settings,
        engine: EngineClient,
        compiler: CompilerClient,
        looptune: LoopTuneClient,
        app_name: str,
    ):
        self.settings = settings
        self.engine = engine
        self.looptune = looptune
        self.app_name = app_name
        cache = ResultCache(settings.serve.result_cache_entries)
        # The tuning store's modules (and sqlite3) load where Operations runs, the ingress, not in the proxy,
        # which imports this module for its gRPC and HTTP methods.
        from optserve.tuning.lookup import open_service_store

        store = open_service_store(settings.tuning)
        self.optimizer = Optimizer(settings, engine, compiler, cache, engine.metadata, store)
        self.background_tuning = None
        if settings.tuning.background and store is not None and not store.read_only:
            from optserve.tuning.background import BackgroundTuning

            self.background_tuning = BackgroundTuning(settings, store).start()
        self.metrics = metrics.recorder(*metrics.INGRESS)
        self._toolchain_asks = dict(self.optimizer.toolchain_asks)  # counted into the metric so far

    async def warm(self) -> None:
        """The first requests' first-use work, done before this replica is ready (`Optimizer.warm`)."""
        await self.optimizer.warm(WARM_TIMEOUT_S)
        self._count_toolchain_asks()

    async def optimize(self, request: schemas.OptimizeRequest) -> schemas.OptimizeResponse:
        fields = access_fields()
        fields.update(strategy=request.strategy, samples=request.samples, objective=request.objective)
        try:
            response = await self.optimizer.optimize(request)
        finally:
            self._count_toolchain_asks()
        fields.update(cached=response.cached, deadline_hit=response.deadline_hit)
        if not request.bypass_cache:
            self.metrics.count(metrics.CACHE_LOOKUPS, result="hit" if response.cached else "miss")
        if not response.cached:
            compiled = [c for c in response.candidates if c.source != schemas.CandidateSource.CLIENT_BASELINE]
            self.metrics.observe(metrics.CANDIDATES, len(compiled))
            if request.baseline_cost is None:  # the metric is against -Oz, not against a client's baseline
                self.metrics.observe(metrics.IMPROVEMENT, max(response.improvement_over_oz_pct, 0.0))
        if response.deadline_hit:
            self.metrics.count(metrics.DEADLINE_HITS)
        return response

    def _count_toolchain_asks(self) -> None:
        for when, asks in self.optimizer.toolchain_asks.items():
            self.metrics.count(metrics.TOOLCHAIN_ASKS, asks - self._toolchain_asks[when], when=when)
            self._toolchain_asks[when] = asks

    async def schedule(
        self, request: schemas.ScheduleRequest, deadline: Deadline | None = None
    ) -> schemas.ScheduleResponse:
        """`deadline`: when the answer must be ready (a gRPC call's; HTTP has none)."""
        return await self.looptune.schedule(request, deadline)

    async def model_metadata(self) -> schemas.ModelMetadata:
        return await self.engine.metadata()

    async def readiness(self) -> dict[str, str]:
        """Per part (model, compiler, looptune): "ready", or why not (serve/replicas/readiness.py)."""
        return await readiness(await deployment_statuses(self.app_name), self.engine)

    @asynccontextmanager
    async def record(
        self, operation: str, protocol: str, trace_parent: Mapping[str, str] | None = None
    ) -> AsyncIterator[None]:
        """Around one request's work, which the edge runs itself inside: count it, time it, trace it (a
        child of the caller's `trace_parent` headers, if any), write its access line (with the request id)
        and turn a failure into the `ServiceError` the caller sees. A context manager rather than a runner
        of the work, so that control goes one way: the edge calls `record`, then the operation, never
        `record` back into the edge."""
        started = time.monotonic()
        code = "OK"
        fields: dict[str, Any] = start_access(operation=operation, protocol=protocol)
        with tracing.span(f"optserve.{operation}", trace_parent, protocol=protocol) as span:
            try:
                yield
            except Exception as err:
                error = as_service_error(err)
                code = error.kind.grpc_code.name
                fields["error"] = error.message
                raise error from None
            finally:
                elapsed_s = time.monotonic() - started
                self.metrics.count(metrics.REQUESTS, operation=operation, protocol=protocol, code=code)
                self.metrics.observe(metrics.LATENCY, elapsed_s, operation=operation)
                log_access(code, elapsed_s)
                if span is not None:
                    span.set_attribute("optserve.code", code)
