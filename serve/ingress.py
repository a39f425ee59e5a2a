"""The ingress: the gRPC servicer methods and the HTTP/JSON API, both over one `Optimizer`.

Ray Serve's proxy routes a gRPC call to the ingress method named like the RPC (`Optimize`, `Schedule`,
`GetModelMetadata`, and `Check` of the standard `grpc.health.v1.Health` service), with the request as raw
bytes that the method parses (serve/grpc_services.py); HTTP goes through the FastAPI app below. Both
convert to the pydantic models of serve/schemas.py, run the same flow, and turn a `ServiceError` into the
status it names (gRPC code, or HTTP status with a JSON error body).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from grpc_health.v1 import health_pb2
from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle
from starlette.exceptions import HTTPException

import optserve
from optserve.compiler.cache import ResultCache
from optserve.config import Settings
from optserve.engine.feedback import build_feedback
from optserve.engine.interface import Generation, SamplingOptions
from optserve.serve import codec, metrics, schemas
from optserve.serve.access import TOKEN_HEADER, check_peer, check_token, plaintext_grpc_host
from optserve.serve.deployments import CompilerWorkers, LoopTuneScheduler, PassOrderingEngine
from optserve.serve.errors import ErrorKind, ModelInputTooLong, ServiceError, unavailable
from optserve.serve.grpc_services import parse_request
from optserve.serve.logs import access_fields, configure_replica_logging, log_access, start_access
from optserve.serve.openapi import install_contract
from optserve.serve.optimize import Optimizer
from optserve.v1 import optserve_pb2 as pb

log = logging.getLogger(__name__)

PASS_ORDERING_SERVICE = "optserve.v1.PassOrdering"
LOOPTUNE_SERVICE = "optserve.v1.LoopTune"
# How long the ingress waits for the engine's metadata: it answers at once unless no replica is running.
ENGINE_ANSWER_TIMEOUT_S = 5.0
_READY_DEPLOYMENT_STATES = {"HEALTHY", "UPSCALING", "DOWNSCALING"}
HEALTH_REASON_KEY = "optserve-not-serving-reason"  # trailing metadata of a NOT_SERVING health answer
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

# Operation label of an HTTP request that never reached its route (bounded values, never the raw path).
_OPERATIONS_BY_PATH = {"/v1/optimize": "optimize", "/v1/schedule": "schedule", "/v1/model": "model_metadata"}


def _count_refused_http(path: str, code: str) -> None:
    """Count an HTTP request refused before its route ran (the exception handlers and middleware below)."""
    operation = next((op for suffix, op in _OPERATIONS_BY_PATH.items() if path.endswith(suffix)), "other")
    recorder = metrics.recorder(*metrics.INGRESS)
    recorder.count(metrics.REQUESTS, operation=operation, protocol="http", code=code)


def as_service_error(err: BaseException) -> ServiceError:
    """What a failure means to the caller: a ServiceError from any layer, or the Ray failure it stands for."""
    if isinstance(err, RayTaskError) and isinstance(err.cause, BaseException):
        return as_service_error(err.cause)
    if isinstance(err, ServiceError):
        return err
    if isinstance(err, BackPressureError):
        return ServiceError(ErrorKind.RESOURCE_EXHAUSTED, f"the service is at capacity, retry later ({err})")
    if isinstance(err, DeploymentUnavailableError | RayActorError):
        return ServiceError(ErrorKind.UNAVAILABLE, f"a backend is unavailable, retry later ({err})")
    log.exception("internal error", exc_info=err)
    return ServiceError(ErrorKind.INTERNAL, f"internal error: {type(err).__name__}: {err}")


def _answer_error(context, err: ServiceError, empty: Any) -> Any:
    """A gRPC error answer: the status and message on the call, an empty response message."""
    context.set_code(err.kind.grpc_code)
    context.set_details(err.message)
    return empty


class _EngineClient:
    """The engine deployment seen through the Optimizer's `CandidateGenerator` seam.

    A ready model's metadata is kept (it does not change under a running app) until a call to the engine
    fails: the engine may have died, and the next Optimize asks it again, answering UNAVAILABLE quickly
    while its replica is replaced instead of waiting for the new one behind the request's deadline.
    """

    def __init__(self, handle: DeploymentHandle):
        self.handle = handle
        self._ready_metadata: schemas.ModelMetadata | None = None

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None) -> Generation:
        try:
            return await self.handle.generate.remote(ir, options, feedback)
        except RayTaskError as err:  # the Optimizer handles the engine's own errors by type
            if not isinstance(err.cause, ModelInputTooLong):
                self.forget()
            if isinstance(err.cause, ServiceError | ModelInputTooLong):
                raise err.cause from None
            raise
        except Exception:
            self.forget()
            raise

    async def metadata(self, fresh: bool = False) -> schemas.ModelMetadata:
        """The model's metadata; UNAVAILABLE if its engine does not answer (no replica: it is restarting)."""
        if self._ready_metadata is not None and not fresh:
            return self._ready_metadata
        try:
            metadata = await asyncio.wait_for(self.handle.metadata.remote(), ENGINE_ANSWER_TIMEOUT_S)
        except TimeoutError:
            raise unavailable(
                f"the pass-ordering engine did not answer within {ENGINE_ANSWER_TIMEOUT_S:g} s (its replica "
                "is starting or being replaced); retry shortly"
            ) from None
        self._ready_metadata = metadata if metadata.ready else None
        return metadata

    def forget(self) -> None:
        self._ready_metadata = None


class _CompilerClient:
    def __init__(self, handle: DeploymentHandle):
        self.handle = handle

    async def evaluate(self, ir, pass_lists, objective, want_ir, want_object) -> list:
        return await self.handle.evaluate.remote(ir, list(pass_lists), objective, want_ir, want_object)


api = FastAPI(
    title="optserve",
    version=optserve.__version__,
    description=(
        "Pass ordering (LLVM IR -> the best pass list, checked by a real compiler, never worse than -Oz) and "
        "LoopTune loop schedules. The same operations are served over gRPC "
        "(proto/optserve/v1/optserve.proto). "
        "Errors are JSON `{error: {code, message}}` with the gRPC status name as `code`."
    ),
)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the error statuses a route can answer, each with the JSON error body."""
    return {status: {"model": schemas.ErrorResponse} for status in statuses}


# 403 is gRPC's alone (loopback-only callers); 413 needs a body; 500: -Oz itself failed on the module.
_WORK_ERRORS = _errors(400, 401, 413, 429, 500, 503, 504)
_READ_ERRORS = _errors(401, 503)
_MODEL_ERRORS = _errors(401, 404, 503)
# The model answered "not ready", or the engine could not be asked (the JSON error body).
_NOT_READY_OR_UNAVAILABLE = {
    "description": "the model is not ready, or the engine is unavailable",
    "content": {
        "application/json": {
            "schema": {
                "anyOf": [
                    {"$ref": "#/components/schemas/ModelReadiness"},
                    {"$ref": "#/components/schemas/ErrorResponse"},
                ]
            }
        }
    },
}


# JSON escapes text and base64 grows bitcode by 4/3: a body may be this much larger than the IR it carries.
_BODY_BYTES_PER_IR_BYTE = 2
_BODY_OVERHEAD_BYTES = 64 * 1024


@api.middleware("http")
async def _limit_body_size(request: Request, call_next):
    """413 before reading a body larger than any acceptable request (`app.state.max_body_bytes`)."""
    length = request.headers.get("content-length", "")
    limit = getattr(request.app.state, "max_body_bytes", None)
    if limit is not None and length.isdigit() and int(length) > limit:
        error = ServiceError(ErrorKind.TOO_LARGE, f"request body is {length} bytes, more than {limit}")
        _count_refused_http(request.url.path, error.kind.grpc_code.name)
        return JSONResponse(error.to_json(), status_code=error.kind.http_status)
    return await call_next(request)


@api.exception_handler(ServiceError)
async def _service_error_response(request: Request, err: ServiceError) -> JSONResponse:
    return JSONResponse(err.to_json(), status_code=err.kind.http_status)


@api.exception_handler(HTTPException)
async def _http_error_response(request: Request, err: HTTPException) -> JSONResponse:
    """Starlette's own refusals (unreadable body, unknown path, wrong method) in the API's error body."""
    kind = next((kind for kind in ErrorKind if kind.http_status == err.status_code), None)
    code = kind.grpc_code.name if kind is not None else HTTPStatus(err.status_code).name
    body = {"error": {"code": code, "message": str(err.detail)}}
    return JSONResponse(body, status_code=err.status_code, headers=err.headers)


@api.exception_handler(RequestValidationError)
async def _validation_error_response(request: Request, err: RequestValidationError) -> JSONResponse:
    problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()]
    _count_refused_http(request.url.path, "INVALID_ARGUMENT")
    return JSONResponse(
        ServiceError(ErrorKind.INVALID_ARGUMENT, "; ".join(problems)).to_json(), status_code=400
    )


@serve.deployment(name="Ingress")
@serve.ingress(api)
class Ingress:
    def __init__(
        self,
        settings: dict,
        engine: DeploymentHandle,
        compiler: DeploymentHandle,
        looptune: DeploymentHandle,
    ):
        configure_replica_logging()
        self.settings = Settings.model_validate(settings)
        self.engine = _EngineClient(engine)
        self.looptune = looptune
        self.optimizer = Optimizer(
            self.settings,
            self.engine,
            _CompilerClient(compiler),
            ResultCache(self.settings.serve.result_cache_entries),
            build_feedback,
        )
        self.metrics = metrics.recorder(*metrics.INGRESS)
        self.app_name = serve.get_replica_context().app_name
        api.state.max_body_bytes = (
            self.settings.compiler.max_ir_bytes * _BODY_BYTES_PER_IR_BYTE + _BODY_OVERHEAD_BYTES
        )
        install_contract(api, self.settings)

    # --- the operations, shared by both protocols ----------------------------------------------------

    async def _optimize(self, request: schemas.OptimizeRequest) -> schemas.OptimizeResponse:
        fields = access_fields()
        fields.update(strategy=request.strategy, samples=request.samples, objective=request.objective)
        response = await self.optimizer.optimize(request)
        fields.update(cached=response.cached, deadline_hit=response.deadline_hit)
        if not request.bypass_cache:
            self.metrics.count(metrics.CACHE_LOOKUPS, result="hit" if response.cached else "miss")
        if not response.cached:
            self.metrics.observe(metrics.CANDIDATES, len(response.candidates))
            self.metrics.observe(metrics.IMPROVEMENT, max(response.improvement_over_oz_pct, 0.0))
        if response.deadline_hit:
            self.metrics.count(metrics.DEADLINE_HITS)
        return response

    async def _schedule(self, request: schemas.ScheduleRequest) -> schemas.ScheduleResponse:
        return await self.looptune.schedule.remote(request)

    async def _readiness(self) -> dict[str, str]:
        """Per part: "ready", or why not.

        Each deployment is judged by Ray Serve's health checks of its replicas (`check_health`: a dead
        engine, a compiler pool that lost its workers) rather than by a call, which would wait behind a long
        LoopTune search; the model also by its metadata, which says why it is not ready (not loaded, died).
        """
        status = await asyncio.to_thread(serve.status)
        application = status.applications.get(self.app_name)
        deployments = application.deployments if application is not None else {}

        def state(name: str) -> str:
            if name not in deployments:
                return f"deployment {name} is missing"
            deployment = deployments[name]
            if deployment.status in _READY_DEPLOYMENT_STATES:
                return "ready"
            return f"deployment {name} is {deployment.status}: {deployment.message}".rstrip(": ")

        model_state = state(PassOrderingEngine.name)
        if model_state == "ready":
            try:
                model = await self.engine.metadata(fresh=True)
                model_state = "ready" if model.ready else model.reason
            except Exception as err:
                model_state = as_service_error(err).message
        if model_state != "ready":
            self.engine.forget()
        return {
            "model": model_state,
            "compiler": state(CompilerWorkers.name),
            "looptune": state(LoopTuneScheduler.name),
        }

    async def _record(self, operation: str, protocol: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run one request's work: count it, time it and write its access line (with the request id)."""
        started = time.monotonic()
        code = "OK"
        fields = start_access(operation=operation, protocol=protocol)
        try:
            return await work()
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

    # --- gRPC ------------------------------------------------------------------------------------------

    async def _grpc(self, operation: str, context, empty: Any, work: Callable[[], Awaitable[Any]]) -> Any:
        try:
            if context is not None:
                check_peer(context.peer(), plaintext_grpc_host(self.settings.serve))
                metadata = dict(context.invocation_metadata())
                check_token(metadata.get(TOKEN_HEADER), self.settings.serve.auth_token)
            return await self._record(operation, "grpc", work)
        except ServiceError as err:
            if context is None:
                raise
            return _answer_error(context, err, empty)

    async def Optimize(self, request: bytes, grpc_context=None) -> pb.OptimizeResponse:
        async def work():
            optimize_request = codec.optimize_request(parse_request(pb.OptimizeRequest, request))
            return codec.optimize_response(await self._optimize(optimize_request))

        return await self._grpc("optimize", grpc_context, pb.OptimizeResponse(), work)

    async def GetModelMetadata(self, request: bytes, grpc_context=None) -> pb.ModelMetadata:
        async def work():
            parse_request(pb.ModelMetadataRequest, request)  # no fields, but garbage is still refused
            return codec.model_metadata(await self.engine.metadata())

        return await self._grpc("model_metadata", grpc_context, pb.ModelMetadata(), work)

    async def Schedule(self, request: bytes, grpc_context=None) -> pb.ScheduleResponse:
        async def work():
            schedule_request = codec.schedule_request(parse_request(pb.ScheduleRequest, request))
            return codec.schedule_response(await self._schedule(schedule_request))

        return await self._grpc("schedule", grpc_context, pb.ScheduleResponse(), work)

    async def Check(self, request: bytes, grpc_context=None):
        """grpc.health.v1: "" = the server answers; a service name = that service can do its work now."""
        try:
            service = parse_request(health_pb2.HealthCheckRequest, request).service
        except ServiceError as err:
            return _answer_error(grpc_context, err, health_pb2.HealthCheckResponse())
        if service == "":
            return health_pb2.HealthCheckResponse(status=_SERVING)
        parts = {PASS_ORDERING_SERVICE: ("model", "compiler"), LOOPTUNE_SERVICE: ("looptune",)}
        if service not in parts:
            unknown = ServiceError(ErrorKind.NOT_FOUND, f"unknown service {service!r}")
            return _answer_error(grpc_context, unknown, health_pb2.HealthCheckResponse())
        readiness = await self._readiness()
        reasons = [f"{part}: {readiness[part]}" for part in parts[service] if readiness[part] != "ready"]
        if reasons and grpc_context is not None:  # the health protocol has no field for why
            reason = " ".join("; ".join(reasons).split()).encode("ascii", "replace").decode()  # a valid value
            grpc_context.set_trailing_metadata([(HEALTH_REASON_KEY, reason)])
        return health_pb2.HealthCheckResponse(status=_NOT_SERVING if reasons else _SERVING)

    # --- HTTP ------------------------------------------------------------------------------------------

    async def _http(self, operation: str, authorization: str | None, work: Callable[[], Awaitable[Any]]):
        check_token(authorization, self.settings.serve.auth_token)
        return await self._record(operation, "http", work)

    @api.post("/v1/optimize", response_model_exclude_none=True, responses=_WORK_ERRORS)
    async def http_optimize(
        self, body: schemas.OptimizeRequest, authorization: str | None = Header(None)
    ) -> schemas.OptimizeResponse:
        """The best pass list for an LLVM module: ranked candidates, -Oz cost, timings, model version."""
        return await self._http("optimize", authorization, lambda: self._optimize(body))

    @api.post("/v1/schedule", response_model_exclude_none=True, responses=_WORK_ERRORS)
    async def http_schedule(
        self, body: schemas.ScheduleRequest, authorization: str | None = Header(None)
    ) -> schemas.ScheduleResponse:
        """A loop schedule for a tensor contraction: loop order, splits, actions and GFLOPS."""
        return await self._http("schedule", authorization, lambda: self._schedule(body))

    @api.get("/v1/model", responses=_READ_ERRORS)
    async def http_model(self, authorization: str | None = Header(None)) -> schemas.ModelMetadata:
        """The pass-ordering model: id, version (content hash), backend, readiness and limits."""
        return await self._http("model_metadata", authorization, self.engine.metadata)

    # KServe v2-style health and metadata (https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/)
    @api.get("/v2")
    async def http_server_metadata(self) -> schemas.ServerMetadata:
        return schemas.ServerMetadata(name="optserve", version=api.version, extensions=["grpc", "looptune"])

    @api.get("/v2/health/live")
    async def http_live(self) -> schemas.Liveness:
        return schemas.Liveness(live=True)

    @api.get(
        "/v2/health/ready",
        response_model=schemas.Readiness,
        responses={503: {"model": schemas.Readiness, "description": "a part is not ready"}},
    )
    async def http_ready(self) -> JSONResponse:
        parts = await self._readiness()
        ready = all(state == "ready" for state in parts.values())
        body = schemas.Readiness(ready=ready, parts=parts)
        return JSONResponse(body.model_dump(), status_code=200 if ready else 503)

    @api.get("/v2/models/{name}", responses=_MODEL_ERRORS)
    async def http_kserve_model(
        self, name: str, authorization: str | None = Header(None)
    ) -> schemas.KServeModelMetadata:
        metadata = await self._named_model(name, authorization)
        return schemas.KServeModelMetadata(
            name=metadata.name,
            versions=[metadata.version] if metadata.version else [],
            platform=f"optserve-{metadata.backend}",
            inputs=[schemas.TensorMetadata(name="ir", datatype="BYTES", shape=[1])],
            outputs=[schemas.TensorMetadata(name="pass_list", datatype="BYTES", shape=[-1])],
            ready=metadata.ready,
            reason=metadata.reason,
        )

    @api.get(
        "/v2/models/{name}/ready",
        response_model=schemas.ModelReadiness,
        responses=_MODEL_ERRORS | {503: _NOT_READY_OR_UNAVAILABLE},
    )
    async def http_kserve_model_ready(self, name: str, authorization: str | None = Header(None)):
        metadata = await self._named_model(name, authorization)
        body = schemas.ModelReadiness(name=metadata.name, ready=metadata.ready, reason=metadata.reason)
        return JSONResponse(body.model_dump(), status_code=200 if metadata.ready else 503)

    async def _named_model(self, name: str, authorization: str | None) -> schemas.ModelMetadata:
        metadata = await self._http("model_metadata", authorization, self.engine.metadata)
        if name != metadata.name:
            message = f"no model {name!r}; this service hosts {metadata.name!r}"
            raise ServiceError(ErrorKind.NOT_FOUND, message)
        return metadata

    # Prometheus text exposition, not JSON: PlainTextResponse makes the OpenAPI say text/plain.
    @api.get("/metrics", response_class=PlainTextResponse, responses=_errors(401))
    async def http_metrics(self, authorization: str | None = Header(None)) -> Response:
        check_token(authorization, self.settings.serve.auth_token)
        return Response(await metrics.cluster_metrics(self.app_name), media_type=metrics.CONTENT_TYPE)
