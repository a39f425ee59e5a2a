"""Prometheus metrics of one ingress replica, served at HTTP `/metrics`.

Each ingress replica counts its own requests (its own registry, so nothing else in the Ray worker leaks in);
with several ingress replicas, scrape each (or use Ray's own cluster metrics, which Ray Serve also exports).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class ServiceMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "optserve_requests",
            "Requests answered, by operation, protocol and status code",
            ["operation", "protocol", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "optserve_request_seconds",
            "Time to answer a request, by operation",
            ["operation"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.cache_lookups = Counter(
            "optserve_result_cache_lookups",
            "Optimize result-cache lookups",
            ["result"],
            registry=self.registry,
        )
        self.candidates = Histogram(
            "optserve_candidates_per_request",
            "Candidates compiled and ranked per Optimize answer (-Oz included)",
            buckets=(1, 2, 3, 5, 10, 20, 50, 100),
            registry=self.registry,
        )
        self.deadline_hits = Counter(
            "optserve_deadline_hits", "Optimize answers cut short by their deadline", registry=self.registry
        )
        self.improvement = Histogram(
            "optserve_improvement_over_oz_percent",
            "Cost saved against -Oz by the best candidate",
            buckets=(0, 0.5, 1, 2, 5, 10, 20, 50),
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
