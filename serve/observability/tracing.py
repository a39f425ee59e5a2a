"""OpenTelemetry traces of the service: one span per stage of a request, one trace per request across the
Ray Serve deployments.

Off unless `observability.otlp_endpoint` is set. Off, nothing of OpenTelemetry is imported, no tracer
provider is set, `span` hands back one shared no-op context manager and `carrier` None: a request pays two
attribute reads per stage. On, each replica process (`configure`, called in every deployment's constructor)
sets an SDK tracer provider that batches its spans to the OTLP endpoint (grpc or http/protobuf), named by
`observability.service_name` and the replica's part (`optserve.component`).

The spans (serve/README.md, "Traces"):
- `optserve.<operation>` in the ingress, for gRPC and HTTP alike (serve/edges/operations.py `record`): the
  root of a request's trace, or a child of the caller's own `traceparent` (gRPC metadata, HTTP header);
- `engine.generate` in an engine replica (one per model call);
- `compiler.evaluate` in a compiler replica (one per batch of candidates compiled together);
- `tuning_store.lookup` and `tuning_store.record` in the ingress.

A deployment call is a Ray actor call in another process, where the caller's context is not: the caller
passes `carrier()` (W3C `traceparent`/`tracestate` as a plain dict, or None) as an argument, and the
deployment opens its span with `span(..., parent=that dict)`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from optserve.config import ObservabilitySettings

# The tracer of this process once `configure` turned traces on; None: off, every call below is a no-op.
_tracer: Tracer | None = None
_NO_SPAN = contextlib.nullcontext()  # reusable: `with` it any number of times, nested or not
_TRACE_HEADERS = ("traceparent", "tracestate")
# An HTTP caller's trace-context headers, for its request's span (set by `HttpCallerTrace`).
_http_caller: ContextVar[dict[str, str] | None] = ContextVar("optserve_http_caller_trace", default=None)


def enabled() -> bool:
    return _tracer is not None


def configure(settings: ObservabilitySettings, component: str) -> None:
    """Turn traces on in this process if `settings` name an OTLP endpoint (once: later calls change
    nothing). `component`: which part of the service this process is (ingress, engine, compiler...)."""
    global _tracer
    if not settings.otlp_endpoint or _tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    resource = Resource.create({"service.name": settings.service_name, "optserve.component": component})
    sampler = ParentBased(TraceIdRatioBased(settings.trace_sample_ratio))
    provider = TracerProvider(resource=resource, sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(_exporter(settings)))
    trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer("optserve")


def _exporter(settings: ObservabilitySettings):
    if settings.otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        insecure = not settings.otlp_endpoint.startswith("https://")
        return OTLPSpanExporter(endpoint=settings.otlp_endpoint, insecure=insecure)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=settings.otlp_endpoint)


def span(
    name: str, parent: Mapping[str, str] | None = None, **attributes: Any
) -> contextlib.AbstractContextManager[Span | None]:
    """A span around a stage, as a context manager yielding the span (None when traces are off). `parent`:
    a carrier from another process (`carrier()`, or a caller's metadata with `traceparent`); without one the
    span is a child of this task's current span. An exception leaving it marks the span as failed."""
    if _tracer is None:
        return _NO_SPAN
    context = None
    if parent is not None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        context = TraceContextTextMapPropagator().extract(parent)
    return _tracer.start_as_current_span(name, context=context, attributes=attributes or None)


def caller_trace(metadata) -> dict[str, str] | None:
    """A caller's W3C trace-context headers from gRPC invocation metadata (None: traces are off, or the
    caller sent none), for `span(parent=...)`."""
    if _tracer is None:
        return None
    headers = {key: value for key, value in metadata if key in _TRACE_HEADERS}
    return headers if "traceparent" in headers else None


def http_caller_trace() -> dict[str, str] | None:
    """The W3C trace-context headers of the HTTP request being answered (None: none, or traces off)."""
    return _http_caller.get()


class HttpCallerTrace:
    """ASGI middleware: keeps an HTTP caller's `traceparent`/`tracestate` headers for the request's span
    (`http_caller_trace`), so it continues the caller's trace. Traces off, it looks at nothing."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if _tracer is None or scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {
            key.decode("latin-1"): value.decode("latin-1")
            for key, value in scope["headers"]
            if key.decode("latin-1") in _TRACE_HEADERS
        }
        token = _http_caller.set(headers if "traceparent" in headers else None)
        try:
            return await self.app(scope, receive, send)
        finally:
            _http_caller.reset(token)


def carrier() -> dict[str, str] | None:
    """The current span's context as W3C trace-context headers, to pass on a deployment call (None: traces
    are off, or no span is current)."""
    if _tracer is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    headers: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(headers)
    return headers or None
