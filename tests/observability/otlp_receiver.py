"""A real OTLP trace receiver in the test process: a gRPC server implementing opentelemetry-proto's
TraceService, keeping every span the service's replicas export, for the tests to read."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex, as in a W3C traceparent
    span_id: str
    parent_span_id: str  # "" for a root span
    component: str  # the exporting process's `optserve.component` resource attribute
    attributes: dict


def _value(any_value):
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver):
        self.receiver = receiver

    def Export(self, request, context):  # noqa: N802 (the proto's method name)
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            component=str(resource.get("optserve.component", "")),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        self.receiver.add(spans)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """Listens on 127.0.0.1 (a port of the system's choosing: `endpoint`) until `stop`."""

    def __init__(self):
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(self), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self._server.start()

    def add(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self._spans += spans

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, predicate, timeout_s: float = 60.0) -> list[ReceivedSpan]:
        """The spans received, once `predicate(spans)` holds (or the timeout passes: the test then fails on
        what it finds). Replicas export in batches every few seconds."""
        deadline = time.monotonic() + timeout_s
        while not predicate(spans := self.spans()) and time.monotonic() < deadline:
            time.sleep(0.5)  # polling the replicas' periodic export, bounded by the deadline
        return spans

    def stop(self) -> None:
        self._server.stop(grace=None)
