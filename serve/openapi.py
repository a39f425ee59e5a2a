"""The HTTP API's OpenAPI document, made to say exactly what the server enforces (schemathesis checks it).

FastAPI derives the document from the routes and serve/schemas.py; this adds what depends on the settings
(the limits on samples, feedback rounds, deadlines, schedule searches and index sizes; the schedule methods)
and drops FastAPI's 422 answers, which this API never gives (bad requests are 400 with the JSON error body).
"""

from __future__ import annotations

from fastapi import FastAPI

from optserve.config import Settings
from optserve.policies.methods import SearchMethod  # what /v1/schedule's `method` accepts


def _value(field: dict) -> dict:
    """The schema of a nullable field's value (pydantic writes `T | None` as anyOf [T, null])."""
    return next((branch for branch in field.get("anyOf", ()) if branch.get("type") != "null"), field)


def install_contract(app: FastAPI, settings: Settings) -> dict:
    """Build `app`'s OpenAPI document with `settings`' limits; FastAPI serves it from `app.openapi_schema`."""

    app.openapi_schema = None
    document = app.openapi()
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
    bodies = document["components"]["schemas"]
    for unused in ("HTTPValidationError", "ValidationError"):
        bodies.pop(unused, None)
    optimize = bodies["OptimizeRequest"]["properties"]
    optimize["samples"]["maximum"] = settings.engine.max_samples
    optimize["feedback_rounds"]["maximum"] = settings.engine.max_feedback_rounds
    _value(optimize["deadline_s"])["maximum"] = settings.serve.max_deadline_s
    schedule = bodies["ScheduleRequest"]["properties"]
    _value(schedule["method"])["enum"] = sorted(method.value for method in SearchMethod)
    _value(schedule["time_limit_s"])["maximum"] = settings.looptune.search_time_limit_s
    schedule["sizes"]["additionalProperties"]["maximum"] = settings.looptune.max_dim
    return document
