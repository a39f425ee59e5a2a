"""The ingress deployment: the face of the service, answering gRPC and HTTP/JSON over the same operations.

Ray Serve routes a gRPC call to the method named like the RPC (`Optimize`, `Schedule`, `GetModelMetadata`,
and `Check` of the standard `grpc.health.v1.Health` service) and an HTTP request to a route of the FastAPI
app. Each method here only passes the request on: the operations are in serve/edges/operations.py, the gRPC
parsing, checks and status answers in serve/edges/grpc_methods.py, the HTTP app, its error bodies and KServe
bodies in serve/edges/http_app.py, the back-end handles in serve/replicas/handles.py.
"""

from __future__ import annotations

from fastapi import Header
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from ray import serve
from ray.serve.handle import DeploymentHandle

from optserve.config import Settings
from optserve.serve import schemas
from optserve.serve.edges.access import check_token
from optserve.serve.edges.grpc_methods import GrpcMethods
from optserve.serve.edges.http_app import (
    MODEL_ERRORS,
    NOT_READY_OR_UNAVAILABLE,
    READ_ERRORS,
    WORK_ERRORS,
    api,
    errors,
    kserve_model,
    kserve_model_readiness,
    limit_bodies,
    named_model,
    readiness_response,
)
from optserve.serve.edges.openapi import install_contract
from optserve.serve.edges.operations import Operations
from optserve.serve.observability import metrics, tracing
from optserve.serve.observability.logs import configure_replica_logging
from optserve.serve.replicas.handles import CompilerClient, EngineClient, LoopTuneClient
from optserve.v1 import optserve_pb2 as pb


@serve.deployment(name="Ingress")
@serve.ingress(api)
class Ingress:
    async def __init__(  # type: ignore[misc] (Ray Serve awaits an async constructor)
        self,
        settings: dict,
        engine: DeploymentHandle,
        compiler: DeploymentHandle,
        looptune: DeploymentHandle,
    ):
        configure_replica_logging()
        self.settings = Settings.model_validate(settings)
        tracing.configure(self.settings.observability, "ingress")
        self.app_name = serve.get_replica_context().app_name
        self.operations = Operations(
            self.settings,
            EngineClient(engine),
            CompilerClient(compiler),
            LoopTuneClient(looptune),
            self.app_name,
        )
        self.grpc = GrpcMethods(self.operations, self.settings)
        limit_bodies(api, self.settings)  # the app Ray Serve serves (see limit_bodies)
        install_contract(api, self.settings)
        # Ready means warm: the first requests find the compiler's handle, the host's toolchain and the
        # store's first read done (a first build's first units answered as fast as the rest).
        await self.operations.warm()

    # --- gRPC ------------------------------------------------------------------------------------------

    async def Optimize(self, request: bytes, grpc_context=None) -> pb.OptimizeResponse:
        return await self.grpc.optimize(request, grpc_context)

    async def GetModelMetadata(self, request: bytes, grpc_context=None) -> pb.ModelMetadata:
        return await self.grpc.model_metadata(request, grpc_context)

    async def Schedule(self, request: bytes, grpc_context=None) -> pb.ScheduleResponse:
        return await self.grpc.schedule(request, grpc_context)

    async def Check(self, request: bytes, grpc_context=None):
        return await self.grpc.check(request, grpc_context)

    # --- HTTP ------------------------------------------------------------------------------------------

    def _http(self, operation: str, authorization: str | None):
        """Check the caller's token; the operation's record (serve/edges/operations.py) to run its work in."""
        check_token(authorization, self.settings.serve.auth_token)
        return self.operations.record(operation, "http", tracing.http_caller_trace())

    @api.post("/v1/optimize", response_model_exclude_none=True, responses=WORK_ERRORS)
    async def http_optimize(
        self, body: schemas.OptimizeRequest, authorization: str | None = Header(None)
    ) -> schemas.OptimizeResponse:
        """The best pass list for an LLVM module: ranked candidates, -Oz cost, timings, model version."""
        async with self._http("optimize", authorization):
            return await self.operations.optimize(body)

    @api.post("/v1/schedule", response_model_exclude_none=True, responses=WORK_ERRORS)
    async def http_schedule(
        self, body: schemas.ScheduleRequest, authorization: str | None = Header(None)
    ) -> schemas.ScheduleResponse:
        """A loop schedule for a tensor contraction: loop order, splits, actions and GFLOPS."""
        async with self._http("schedule", authorization):
            return await self.operations.schedule(body)

    @api.get("/v1/model", responses=READ_ERRORS)
    async def http_model(self, authorization: str | None = Header(None)) -> schemas.ModelMetadata:
        """The pass-ordering model: id, version (content hash), backend, readiness and limits."""
        async with self._http("model_metadata", authorization):
            return await self.operations.model_metadata()

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
        return readiness_response(await self.operations.readiness())

    @api.get("/v2/models/{name}", responses=MODEL_ERRORS)
    async def http_kserve_model(
        self, name: str, authorization: str | None = Header(None)
    ) -> schemas.KServeModelMetadata:
        return kserve_model(await self._named_model(name, authorization))

    @api.get(
        "/v2/models/{name}/ready",
        response_model=schemas.ModelReadiness,
        responses=MODEL_ERRORS | {503: NOT_READY_OR_UNAVAILABLE},
    )
    async def http_kserve_model_ready(self, name: str, authorization: str | None = Header(None)):
        return kserve_model_readiness(await self._named_model(name, authorization))

    async def _named_model(self, name: str, authorization: str | None) -> schemas.ModelMetadata:
        async with self._http("model_metadata", authorization):
            metadata = await self.operations.model_metadata()
        return named_model(metadata, name)

    # Prometheus text exposition, not JSON: PlainTextResponse makes the OpenAPI say text/plain.
    @api.get("/metrics", response_class=PlainTextResponse, responses=errors(401))
    async def http_metrics(self, authorization: str | None = Header(None)) -> Response:
        check_token(authorization, self.settings.serve.auth_token)
        return Response(await metrics.cluster_metrics(self.app_name), media_type=metrics.CONTENT_TYPE)
