"""The HTTP/JSON API's FastAPI app: its description, body-size limit, error bodies and documented answers.

The routes themselves are methods of the ingress (serve/ingress.py), which Ray Serve mounts on this
app; what they answer beyond an operation's result (KServe bodies, readiness statuses) is built here. Every
error is the JSON body `{error: {code, message}}` with the gRPC status name as `code` (serve/errors.py).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException

import optserve
from optserve.config import Settings
from optserve.serve import schemas
from optserve.serve.errors import RETRY_AFTER_S, RETRY_AFTER_STATUSES, ErrorKind, ServiceError
from optserve.serve.observability import metrics, tracing
from optserve.serve.replicas.readiness import READY

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


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the error statuses a route can answer, each with the JSON error body."""
    return {status: {"model": schemas.ErrorResponse} for status in statuses}


# 403 is gRPC's alone (loopback-only callers); 413 needs a body; 500: -Oz itself failed on the module.
WORK_ERRORS = errors(400, 401, 413, 429, 500, 503, 504)
READ_ERRORS = errors(401, 503)
MODEL_ERRORS = errors(401, 404, 503)
# The model answered "not ready", or the engine could not be asked (the JSON error body).
NOT_READY_OR_UNAVAILABLE = {
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
# Operation label of an HTTP request that never reached its route (bounded values, never the raw path).
_OPERATIONS_BY_PATH = {"/v1/optimize": "optimize", "/v1/schedule": "schedule", "/v1/model": "model_metadata"}


def limit_bodies(app: FastAPI, settings: Settings) -> None:
    """Refuse bodies larger than any acceptable request under `settings` (413, before reading them).

    `app` is the ingress's own: Ray Serve serves a copy of `api` made when the ingress class was decorated.
    """
    app.state.max_body_bytes = settings.compiler.max_ir_bytes * _BODY_BYTES_PER_IR_BYTE + _BODY_OVERHEAD_BYTES


def _count_refused(path: str, code: str) -> None:
    """Count an HTTP request refused before its route ran (the exception handlers and middleware below)."""
    operation = next((op for suffix, op in _OPERATIONS_BY_PATH.items() if path.endswith(suffix)), "other")
    recorder = metrics.recorder(*metrics.INGRESS)
    recorder.count(metrics.REQUESTS, operation=operation, protocol="http", code=code)


class _BodyTooLarge(HTTPException):
    """The body read so far is over the limit (413): raised by the receive channel, so the route stops
    reading; the handler below answers it as the API's error body."""

    def __init__(self, detail: str):
        super().__init__(status_code=ErrorKind.TOO_LARGE.http_status, detail=detail)


class _LimitBodySize:
    """413 for a body larger than any acceptable request (`app.state.max_body_bytes`): before reading it
    when its Content-Length says so, else as soon as the bytes read pass the limit (a chunked body has no
    length), so the ingress never holds more than the limit of one body (pure ASGI: it wraps `receive`)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        limit = getattr(scope["app"].state, "max_body_bytes", None) if scope["type"] == "http" else None
        if limit is None:
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > limit:
            error = ServiceError(ErrorKind.TOO_LARGE, f"request body is {length} bytes, more than {limit}")
            _count_refused(path, error.kind.grpc_code.name)
            refusal = JSONResponse(error.to_json(), status_code=error.kind.http_status)
            return await refusal(scope, receive, send)
        read = 0

        async def limited_receive():
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    _count_refused(path, ErrorKind.TOO_LARGE.grpc_code.name)
                    raise _BodyTooLarge(f"request body is more than {limit} bytes (read while it was sent)")
            return message

        return await self.app(scope, limited_receive, send)


api.add_middleware(_LimitBodySize)
api.add_middleware(tracing.HttpCallerTrace)  # a caller's traceparent header, for the request's span


@api.exception_handler(ServiceError)
async def _service_error_response(request: Request, err: ServiceError) -> JSONResponse:
    status = err.kind.http_status  # 429 and 503 say when to try again (serve/errors.py: retry_after_s)
    return JSONResponse(err.to_json(), status_code=status, headers=_with_retry_after(status))


@api.exception_handler(HTTPException)
async def _http_error_response(request: Request, err: HTTPException) -> JSONResponse:
    """Starlette's own refusals (unreadable body, unknown path, wrong method) in the API's error body."""
    kind = next((kind for kind in ErrorKind if kind.http_status == err.status_code), None)
    code = kind.grpc_code.name if kind is not None else HTTPStatus(err.status_code).name
    body = {"error": {"code": code, "message": str(err.detail)}}
    return JSONResponse(
        body, status_code=err.status_code, headers=_with_retry_after(err.status_code, err.headers)
    )


def _with_retry_after(status: int, headers: dict[str, str] | None = None) -> dict[str, str] | None:
    """`headers` and, for a 429 or 503 answer, `Retry-After` (RETRY_AFTER_S) unless they have one."""
    if status not in RETRY_AFTER_STATUSES or any(k.lower() == "retry-after" for k in headers or {}):
        return headers
    return {**(headers or {}), "retry-after": str(RETRY_AFTER_S)}


@api.exception_handler(RequestValidationError)
async def _validation_error_response(request: Request, err: RequestValidationError) -> JSONResponse:
    problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()]
    _count_refused(request.url.path, "INVALID_ARGUMENT")
    return JSONResponse(
        ServiceError(ErrorKind.INVALID_ARGUMENT, "; ".join(problems)).to_json(), status_code=400
    )


def readiness_response(parts: dict[str, str]) -> JSONResponse:
    """`/v2/health/ready`: 200 when every part is ready, else 503; the parts' states either way."""
    ready = all(state == READY for state in parts.values())
    body = schemas.Readiness(ready=ready, parts=parts)
    status = 200 if ready else 503
    return JSONResponse(body.model_dump(), status_code=status, headers=_with_retry_after(status))


def named_model(metadata: schemas.ModelMetadata, name: str) -> schemas.ModelMetadata:
    """`metadata` if it is the model called `name`; NOT_FOUND otherwise (KServe's `/v2/models/{name}`)."""
    if name != metadata.name:
        message = f"no model {name!r}; this service hosts {metadata.name!r}"
        raise ServiceError(ErrorKind.NOT_FOUND, message)
    return metadata


def kserve_model(metadata: schemas.ModelMetadata) -> schemas.KServeModelMetadata:
    return schemas.KServeModelMetadata(
        name=metadata.name,
        versions=[metadata.version] if metadata.version else [],
        platform=f"optserve-{metadata.backend}",
        inputs=[schemas.TensorMetadata(name="ir", datatype="BYTES", shape=[1])],
        outputs=[schemas.TensorMetadata(name="pass_list", datatype="BYTES", shape=[-1])],
        ready=metadata.ready,
        reason=metadata.reason,
    )


def kserve_model_readiness(metadata: schemas.ModelMetadata) -> JSONResponse:
    body = schemas.ModelReadiness(name=metadata.name, ready=metadata.ready, reason=metadata.reason)
    status = 200 if metadata.ready else 503
    return JSONResponse(body.model_dump(), status_code=status, headers=_with_retry_after(status))
