"""serve/observability/tracing.py without Ray: a span opened in one process with the carrier another process
passed it is a child of that process's span (the deployment hop), exported over OTLP/HTTP (protobuf) to a real
HTTP receiver; each process sends its spans when it exits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.observability.otlp_receiver import OtlpHttpReceiver

_SETTINGS = """
from optserve.config import ObservabilitySettings
from optserve.serve.observability import tracing
settings = ObservabilitySettings(otlp_endpoint={endpoint!r}, otlp_protocol="http/protobuf")
"""
INGRESS = """
tracing.configure(settings, "ingress")
with tracing.span("optserve.optimize", None, protocol="grpc"):
    print(json.dumps(tracing.carrier()))
"""
ENGINE = """
tracing.configure(settings, "engine")
with tracing.span("engine.generate", json.loads(sys.stdin.read()), strategy="greedy"):
    pass
"""


@pytest.fixture
def http_receiver():
    receiver = OtlpHttpReceiver()
    yield receiver
    receiver.stop()


def _process(program: str, endpoint: str, given: str = "") -> str:
    code = "import json, sys\n" + _SETTINGS.format(endpoint=endpoint) + program
    done = subprocess.run(
        [sys.executable, "-c", code], input=given, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_span_opened_with_another_process_s_carrier_is_its_child(http_receiver):
    carrier = _process(INGRESS, http_receiver.endpoint)
    assert json.loads(carrier)["traceparent"].startswith("00-")
    _process(ENGINE, http_receiver.endpoint, given=carrier)
    spans = http_receiver.wait_for(lambda found: len(found) >= 2, timeout_s=30)
    by_name = {span.name: span for span in spans}
    ingress, engine = by_name["optserve.optimize"], by_name["engine.generate"]
    assert (ingress.component, engine.component) == ("ingress", "engine")
    assert engine.trace_id == ingress.trace_id and engine.parent_span_id == ingress.span_id
    assert ingress.parent_span_id == "" and engine.attributes == {"strategy": "greedy"}
