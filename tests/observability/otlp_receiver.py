"""Real OTLP trace receivers in the test process, keeping every span exported to them for the tests to
read: a gRPC server implementing opentelemetry-proto's TraceService (OTLP/gRPC), and an HTTP server
answering POST /v1/traces (OTLP/HTTP, protobuf bodies)."""

from __future__ import annotations

import gzip
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def received_spans(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
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
    return spans


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: _Received):
        self.receiver = receiver

    def Export(self, request, context):  # noqa: N802 (the proto's method name)
        self.receiver.add(received_spans(request))
        return trace_service_pb2.ExportTraceServiceResponse()


class _Received:
    """The spans a receiver got, for the test to read."""

    def __init__(self):
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

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


class OtlpReceiver(_Received):
    """OTLP/gRPC on 127.0.0.1 (a port of the system's choosing: `endpoint`) until `stop`."""

    def __init__(self):
        super().__init__()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(self), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)


class OtlpHttpReceiver(_Received):
    """OTLP/HTTP: POST /v1/traces on 127.0.0.1 (`endpoint` is the whole URL) until `stop`."""

    def __init__(self):
        super().__init__()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                receiver.add(received_spans(trace_service_pb2.ExportTraceServiceRequest.FromString(body)))
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):  # quiet
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._http.server_address[1]}/v1/traces"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
