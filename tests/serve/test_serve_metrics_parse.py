"""Reading Ray agents' expositions for /metrics (serve/observability/metrics.py, prometheus_client's parser):
escaped label values, histogram buckets and cut answers."""

from __future__ import annotations

from optserve.serve.observability.metrics import CANDIDATES, REQUESTS, parse_exposition, sum_over_replicas


def _requests(worker: str, code: str, value: float) -> str:
    labels = f'WorkerId="{worker}",application="optserve",code="{code}",operation="optimize",protocol="http"'
    return f"ray_optserve_requests_total{{{labels}}} {value}\n"


def test_label_values_are_read_unescaped_and_written_escaped_once():
    text = _requests("a", 'bad \\"quote\\" \\\\ here', 2) + _requests("b", 'bad \\"quote\\" \\\\ here', 1)
    (_, labels, value), _ = parse_exposition(text)
    assert labels["code"] == 'bad "quote" \\ here' and value == 2.0
    summed = sum_over_replicas([text], "optserve", [REQUESTS])
    line = (
        "optserve_requests_total"
        + '{operation="optimize",protocol="http",code="bad \\"quote\\" \\\\ here"} 3.0'
    )
    assert line in summed.splitlines()


def test_histogram_buckets_are_summed_with_inf_last():
    def node(worker: str, small: float, total: float) -> str:
        series = f'WorkerId="{worker}",application="optserve"'
        return (
            "# TYPE ray_optserve_candidates_per_request histogram\n"
            f'ray_optserve_candidates_per_request_bucket{{{series},le="1.0"}} {small}\n'
            f'ray_optserve_candidates_per_request_bucket{{{series},le="+Inf"}} {total}\n'
            f"ray_optserve_candidates_per_request_sum{{{series}}} {3 * total}\n"
            f"ray_optserve_candidates_per_request_count{{{series}}} {total}\n"
        )

    lines = sum_over_replicas([node("a", 1, 4), node("b", 2, 5)], "optserve", [CANDIDATES]).splitlines()
    buckets = [line for line in lines if line.startswith("optserve_candidates_per_request_bucket")]
    assert buckets == [
        'optserve_candidates_per_request_bucket{le="1.0"} 3.0',
        'optserve_candidates_per_request_bucket{le="+Inf"} 9.0',
    ]
    assert "optserve_candidates_per_request_count 9.0" in lines


def test_an_answer_cut_mid_line_is_skipped_as_an_unreachable_node_is():
    whole = _requests("a", "OK", 2)
    cut = _requests("b", "OK", 5)[:40]
    summed = sum_over_replicas([whole, cut], "optserve", [REQUESTS])
    assert (
        'optserve_requests_total{operation="optimize",protocol="http",code="OK"} 2.0' in summed.splitlines()
    )
