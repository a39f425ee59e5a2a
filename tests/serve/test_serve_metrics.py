"""The /metrics text: one application's counters summed over its replicas and nodes (serve/metrics.py)."""

from __future__ import annotations


def test_metrics_are_summed_over_replicas_and_nodes_of_one_application():
    from optserve.serve.metrics import REQUESTS, sum_over_replicas

    def node(worker: str, app: str, value: float) -> str:
        labels = f'WorkerId="{worker}",application="{app}",code="OK",operation="optimize",protocol="grpc"'
        return f"# TYPE x counter\nray_optserve_requests_total{{{labels}}} {value}\n"

    nodes = [node("a", "optserve", 2), node("b", "optserve", 3), node("c", "other", 7)]
    text = sum_over_replicas(nodes, "optserve")
    line = 'optserve_requests_total{operation="optimize",protocol="grpc",code="OK"} 5.0'
    assert line in text.splitlines() and f"# TYPE {REQUESTS.name} counter" in text
