"""OpenTelemetry traces (serve/observability/tracing.py): one Optimize through the real service is one trace,
with spans from the ingress, the tuning store lookup, the engine and the compiler replicas, received by a real
OTLP receiver; a caller's W3C traceparent (gRPC metadata, HTTP header) is continued; traces off load nothing
of OpenTelemetry."""

from __future__ import annotations

import os
import subprocess
import sys

import grpc

from optserve.clients.python.client import OptserveClient
from optserve.clients.python.requests import optimize_request
from optserve.serve.app import APP_NAME
from optserve.testing.service import DATA, TOKEN
from optserve.v1 import optserve_pb2_grpc

CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"


def _stages(spans, trace_id: str) -> dict[str, list]:
    """The spans of one trace by name."""
    named: dict[str, list] = {}
    for span in spans:
        if span.trace_id == trace_id:
            named.setdefault(span.name, []).append(span)
    return named


def _has_every_stage(trace_id: str):
    wanted = {"optserve.optimize", "tuning_store.lookup", "engine.generate", "compiler.evaluate"}
    return lambda spans: wanted <= set(_stages(spans, trace_id))


def test_one_grpc_optimize_is_one_trace_across_ingress_store_engine_and_compiler(traced_service, receiver):
    endpoints, _ = traced_service
    request = optimize_request((DATA / "add.ll").read_text(), strategy="greedy", bypass_cache=True)
    metadata = [
        ("authorization", f"Bearer {TOKEN}"),
        ("application", APP_NAME),
        ("traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01"),  # the caller's own trace
    ]
    with grpc.insecure_channel(endpoints.grpc_target) as channel:
        answer = optserve_pb2_grpc.PassOrderingStub(channel).Optimize(request, metadata=metadata, timeout=120)
    assert answer.candidates

    stages = _stages(receiver.wait_for(_has_every_stage(CALLER_TRACE_ID)), CALLER_TRACE_ID)
    (ingress,) = stages["optserve.optimize"]
    assert ingress.parent_span_id == CALLER_SPAN_ID and ingress.component == "ingress"
    assert ingress.attributes["protocol"] == "grpc" and ingress.attributes["optserve.code"] == "OK"
    assert {span.component for span in stages["engine.generate"]} == {"engine"}
    assert {span.component for span in stages["compiler.evaluate"]} == {"compiler"}
    assert all(span.attributes["candidates"] >= 1 for span in stages["compiler.evaluate"])
    # Every stage hangs below the ingress's span, in whichever process it ran.
    ids = {span.span_id for spans in stages.values() for span in spans}
    below = [span for name, spans in stages.items() if name != "optserve.optimize" for span in spans]
    assert all(span.parent_span_id in ids for span in below)


def test_an_http_optimize_continues_the_caller_s_traceparent_header(traced_service, receiver, http):
    caller_trace, caller_span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    ir = (DATA / "sum.ll").read_text()
    headers = {"traceparent": f"00-{caller_trace}-{caller_span}-01"}
    body = {"ir": ir, "strategy": "greedy", "bypass_cache": True}
    response = http.post("/v1/optimize", json=body, headers=headers)
    assert response.status_code == 200, response.text
    stages = _stages(receiver.wait_for(_has_every_stage(caller_trace)), caller_trace)
    (ingress,) = stages["optserve.optimize"]
    assert ingress.parent_span_id == caller_span and ingress.attributes["protocol"] == "http"


def test_a_call_without_a_traceparent_is_a_trace_of_its_own_rooted_at_the_ingress(traced_service, receiver):
    endpoints, _ = traced_service
    before = {span.trace_id for span in receiver.spans()}
    with OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME) as client:
        assert client.optimize((DATA / "add.ll").read_text(), bypass_cache=True).candidates

    def new_roots(spans):
        return [s for s in spans if s.name == "optserve.optimize" and s.trace_id not in before]

    (root,) = new_roots(receiver.wait_for(lambda spans: bool(new_roots(spans))))
    assert root.parent_span_id == ""
    stages = _stages(receiver.wait_for(_has_every_stage(root.trace_id)), root.trace_id)
    assert {"engine.generate", "compiler.evaluate", "tuning_store.lookup"} <= set(stages)


def test_traces_off_load_no_opentelemetry_sdk_and_set_no_provider():
    """The default (no endpoint): configuring, spanning and passing a carrier import nothing of the SDK."""
    program = """
import sys
from optserve.config import Settings
from optserve.serve.observability import tracing
tracing.configure(Settings().observability, "ingress")
with tracing.span("optserve.optimize", {"traceparent": "x"}) as span:
    assert span is None and tracing.carrier() is None and tracing.caller_trace([]) is None
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
print("off")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPTSERVE_OBSERVABILITY")}
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "off", done.stderr
