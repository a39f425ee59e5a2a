"""Errors the service answers with: one kind per gRPC status, each with its HTTP status.

Plain modules raise `ServiceError`; the gRPC and HTTP edges turn it into a status code and a message.
"""

from __future__ import annotations

from enum import Enum

import grpc


class ErrorKind(Enum):
    INVALID_ARGUMENT = (grpc.StatusCode.INVALID_ARGUMENT, 400)
    UNAUTHENTICATED = (grpc.StatusCode.UNAUTHENTICATED, 401)
    PERMISSION_DENIED = (grpc.StatusCode.PERMISSION_DENIED, 403)
    RESOURCE_EXHAUSTED = (grpc.StatusCode.RESOURCE_EXHAUSTED, 429)
    TOO_LARGE = (grpc.StatusCode.RESOURCE_EXHAUSTED, 413)  # a request body over the size limit
    NOT_FOUND = (grpc.StatusCode.NOT_FOUND, 404)
    INTERNAL = (grpc.StatusCode.INTERNAL, 500)
    UNAVAILABLE = (grpc.StatusCode.UNAVAILABLE, 503)
    DEADLINE_EXCEEDED = (grpc.StatusCode.DEADLINE_EXCEEDED, 504)

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]


# How long a caller refused for capacity, or answered by a part that is restarting, should wait before trying
# again (the same for Ray Serve's own refusals, serve/app.py); a body over the size limit is refused whenever
# it is sent again. HTTP says it as `Retry-After` (429 and 503), gRPC as `grpc-retry-pushback-ms`.
RETRY_AFTER_S = 1
_RETRY_LATER = {ErrorKind.RESOURCE_EXHAUSTED, ErrorKind.UNAVAILABLE}
RETRY_AFTER_STATUSES = frozenset({429, 503})  # HTTP statuses whose answers carry Retry-After


def retry_after_s(kind: ErrorKind) -> int | None:
    """Seconds to wait before trying again after an answer of `kind`: a number for overload and for a part
    that is unavailable (restarting, not ready), -1 for a refusal that a retry would get again, None when
    the answer says nothing about retrying."""
    if kind in _RETRY_LATER:
        return RETRY_AFTER_S
    return -1 if kind is ErrorKind.TOO_LARGE else None


class ServiceError(Exception):
    """A request failed for a reason the caller should see."""

    def __init__(self, kind: ErrorKind, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def to_json(self) -> dict:
        return {"error": {"code": self.kind.grpc_code.name, "message": self.message}}

    def __reduce__(self):  # keep kind and message when Ray pickles the error across processes
        return (ServiceError, (self.kind, self.message))


def invalid(message: str) -> ServiceError:
    return ServiceError(ErrorKind.INVALID_ARGUMENT, message)


def unavailable(message: str) -> ServiceError:
    return ServiceError(ErrorKind.UNAVAILABLE, message)
