"""The HTTP API's OpenAPI document, made to say exactly what the server enforces (schemathesis checks it).

FastAPI derives the document from the routes and serve/schemas.py; this adds what depends on the settings
(the limits on IR length, samples, feedback rounds, deadlines, schedule searches, index sizes and counts; the
schedule methods)
and drops FastAPI's 422 answers, which this API never gives (bad requests are 400 with the JSON error body).
"""

from __future__ import annotations

import copy

from fastapi import FastAPI

from optserve.config import Settings
from optserve.policies.methods import SearchMethod  # what /v1/schedule's `method` accepts


def _value(field: dict) -> dict:
    """The schema of a nullable field's value (pydantic writes `T | None` as anyOf [T, null])."""
    return next((branch for branch in field.get("anyOf", ()) if branch.get("type") != "null"), field)


def install_contract(app: FastAPI, settings: Settings) -> dict:
    """Build `app`'s OpenAPI document with `settings`' limits; FastAPI serves it from `app.openapi_schema`."""

    app.openapi_schema = None
    # A copy: FastAPI's document shares dicts with serve/schemas.py's constants, which must not change here.
    document = app.openapi_schema = copy.deepcopy(app.openapi())
    for operations in document["paths"].values():
        for operation in operations.values():
            operation["responses"].pop("422", None)
    bodies = document["components"]["schemas"]
    for unused in ("HTTPValidationError", "ValidationError"):
        bodies.pop(unused, None)
    for module in bodies["OptimizeRequest"]["oneOf"]:  # text: at most one character per byte of the limit
        if "ir" in module["required"]:
            module["properties"]["ir"]["maxLength"] = settings.compiler.max_ir_bytes
    optimize = bodies["OptimizeRequest"]["properties"]
    optimize["samples"]["maximum"] = settings.engine.max_samples
    optimize["feedback_rounds"]["maximum"] = settings.engine.max_feedback_rounds
    _value(optimize["deadline_s"])["maximum"] = settings.serve.max_deadline_s
    schedule = bodies["ScheduleRequest"]["properties"]
    _value(schedule["method"])["enum"] = sorted(method.value for method in SearchMethod)
    _value(schedule["time_limit_s"])["maximum"] = settings.looptune.search_time_limit_s
    schedule["sizes"]["additionalProperties"]["maximum"] = settings.looptune.max_dim
    schedule["sizes"]["maxProperties"] = settings.looptune.max_loops  # one size per index, one loop each
    return document
