"""The /metrics text: one application's counters summed over its replicas and nodes
(serve/observability/metrics.py)."""

from __future__ import annotations


def test_metrics_are_summed_over_replicas_and_nodes_of_one_application():
    from optserve.serve.observability.metrics import REQUESTS, sum_over_replicas

    def node(worker: str, app: str, value: float) -> str:
        labels = f'WorkerId="{worker}",application="{app}",code="OK",operation="optimize",protocol="grpc"'
        return f"# TYPE x counter\nray_optserve_requests_total{{{labels}}} {value}\n"

    nodes = [node("a", "optserve", 2), node("b", "optserve", 3), node("c", "other", 7)]
    text = sum_over_replicas(nodes, "optserve")
    line = 'optserve_requests_total{operation="optimize",protocol="grpc",code="OK"} 5.0'
    assert line in text.splitlines() and f"# TYPE {REQUESTS.name} counter" in text


def _node(worker: str, evaluations: float, pending: float | None = None) -> str:
    """One agent's exposition: a compiler replica's counter, and an engine replica's gauge."""
    series = f'WorkerId="{worker}",application="optserve"'
    text = f'ray_optserve_compiler_evaluations_total{{{series},outcome="ok"}} {evaluations}\n'
    if pending is not None:
        text += f"ray_optserve_engine_pending{{{series}}} {pending}\n"
    return text


def _value(text: str, sample: str) -> float | None:
    from optserve.serve.observability.metrics import parse_exposition

    return next((value for name, _, value in parse_exposition(text) if name == sample), None)


def test_a_node_that_does_not_answer_one_scrape_keeps_its_counts_in_the_sums():
    """Its counters stay at what was last read (else rate() reads a reset: a false spike); its gauges go."""
    from optserve.serve.observability.metrics import CounterMemory, sum_over_replicas

    memory = CounterMemory()
    both = sum_over_replicas([_node("a", 3, pending=1), _node("b", 5, pending=2)], "optserve", memory=memory)
    one = sum_over_replicas([_node("a", 4)], "optserve", memory=memory)  # b's agent did not answer
    back = sum_over_replicas([_node("a", 4), _node("b", 6)], "optserve", memory=memory)
    evaluations = "optserve_compiler_evaluations_total"
    assert [_value(text, evaluations) for text in (both, one, back)] == [8.0, 9.0, 10.0]
    assert _value(both, "optserve_engine_pending") == 3.0 and _value(one, "optserve_engine_pending") is None
    assert _value(sum_over_replicas([_node("a", 4)], "optserve"), evaluations) == 4.0  # no memory: dropped


def test_a_series_that_comes_back_lower_is_a_reset_of_that_series_alone():
    from optserve.serve.observability.metrics import CounterMemory, sum_over_replicas

    memory = CounterMemory()
    evaluations = "optserve_compiler_evaluations_total"
    counted = [
        _value(sum_over_replicas(nodes, "optserve", memory=memory), evaluations)
        for nodes in (
            [_node("a", 5), _node("b", 1)],
            [_node("a", 2), _node("b", 1)],
            [_node("a", 3), _node("b", 2)],
        )
    ]
    assert counted == [6.0, 8.0, 10.0]  # a counted 5, restarted at 0 and counted 2, then 1 more; b 1, then 2
