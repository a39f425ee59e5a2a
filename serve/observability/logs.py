"""Structured logs: one JSON object per line, with the request id, on the stderr of every replica.

Ray forwards each replica's stderr to the terminal of the process that started the service (`optserve serve`,
`serve run`, a container's `docker logs`), each line prefixed by Ray with the replica's name and pid. Ray
Serve's own logs (its access lines, the `ray.serve` logger) are JSON in its log files (`LOGGING_CONFIG`).

The request id is Ray Serve's: the caller's `x-request-id` header (HTTP) or `request_id` metadata (gRPC), else
one Serve makes up; Serve sends it back (HTTP header `x-request-id`, gRPC trailing metadata `request_id`).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from typing import Any

from ray.serve.schema import LoggingConfig

LOGGER = "optserve"  # every module logs under it (`logging.getLogger(__name__)`)
ACCESS_LOGGER = "optserve.access"  # one line per answered request
LOG_LEVEL = "INFO"
# Ray Serve's logs of each deployment (and its access lines) as JSON in its files.
LOGGING_CONFIG = LoggingConfig(encoding="JSON", log_level=LOG_LEVEL)
# The fields of the access line of the request being answered (its asyncio task's own copy).
_access: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("optserve_access")


def request_context() -> dict[str, str]:
    """The request id and application of the request this code runs for ({} outside a request)."""
    from ray.serve.context import _get_serve_request_context  # what Serve's own log filter reads

    context = _get_serve_request_context()
    if not context.request_id:
        return {}
    return {"request_id": context.request_id, "application": context.app_name}


class JsonLineFormatter(logging.Formatter):
    """time, level, logger, message, the request context, and the fields in `extra={"fields": {...}}`."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **request_context(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_replica_logging() -> None:
    """Send the `optserve` loggers of this process to stderr as JSON lines (once per process)."""
    logger = logging.getLogger(LOGGER)
    if any(isinstance(h.formatter, JsonLineFormatter) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    logger.addHandler(handler)
    logger.setLevel(LOG_LEVEL)
    logger.propagate = False  # not twice, whatever the root logger of a Ray worker does


def start_access(**fields: Any) -> dict[str, Any]:
    """Begin the access line of the request this task answers; returns its fields, to add to."""
    access = dict(fields)
    _access.set(access)
    return access


def access_fields() -> dict[str, Any]:
    """The access-line fields of the request this task answers (a throwaway dict outside one)."""
    return _access.get({})


def log_access(code: str, elapsed_s: float) -> None:
    """Write the access line: the fields gathered, the status code and the latency, as one JSON line."""
    fields = access_fields() | {"code": code, "latency_ms": round(elapsed_s * 1000, 2)}
    what = f"{fields.get('protocol', '')} {fields.get('operation', '')} {code}".strip()
    logging.getLogger(ACCESS_LOGGER).info(what, extra={"fields": fields})
