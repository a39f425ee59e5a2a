"""The service's metrics: counted in whichever replica sees the event, summed over the cluster at `/metrics`.

Each replica records through Ray Serve's metrics API (`ray.serve.metrics`); Ray's metrics agent on its node
exports them (Prometheus text, named `ray_<name>`, one series per replica process). HTTP `/metrics` of any
ingress replica reads every node's agent and answers the optserve metrics summed over replicas and nodes
(`cluster_metrics`): one scrape sees the whole service, whichever replica the route picks. Per-replica series
stay available from Ray's agents. Label values are bounded: operation names, status codes, outcomes.

Replicas report every `metrics_report_interval_ms` of Ray (serve/server.py sets 2 s on the Ray it starts), so
a count shows at `/metrics` that long after the event.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_SCRAPE_TIMEOUT_S = 5.0
_RAY_PREFIX = "ray_"  # Ray's agent names every application metric so


@dataclass(frozen=True)
class MetricSpec:
    name: str
    description: str
    kind: str  # "counter", "gauge" or "histogram"
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    def samples(self) -> dict[str, tuple[str, ...]]:
        """Exported sample names and the labels each keeps."""
        if self.kind == "counter":
            return {f"{self.name}_total": self.labels}
        if self.kind == "gauge":
            return {self.name: self.labels}
        return {
            f"{self.name}_bucket": (*self.labels, "le"),
            f"{self.name}_sum": self.labels,
            f"{self.name}_count": self.labels,
        }


REQUESTS = MetricSpec(
    "optserve_requests",
    "Requests answered, by operation, protocol and status code",
    "counter",
    ("operation", "protocol", "code"),
)
LATENCY = MetricSpec(
    "optserve_request_seconds", "Time to answer a request", "histogram", ("operation",), _LATENCY_BUCKETS
)
CACHE_LOOKUPS = MetricSpec(
    "optserve_result_cache_lookups", "Optimize result-cache lookups (hit, miss)", "counter", ("result",)
)
CANDIDATES = MetricSpec(
    "optserve_candidates_per_request",
    "Candidates compiled and ranked per Optimize answer (-Oz included; a client's own baseline is not one)",
    "histogram",
    buckets=(1, 2, 3, 5, 10, 20, 50, 100),
)
DEADLINE_HITS = MetricSpec("optserve_deadline_hits", "Optimize answers cut short by the deadline", "counter")
IMPROVEMENT = MetricSpec(
    "optserve_improvement_over_oz_percent",
    "Cost saved against -Oz by the best candidate",
    "histogram",
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 50),  # Ray takes positive bounds only
)
ENGINE_TOKENS = MetricSpec(
    "optserve_engine_tokens", "Tokens run through the model (uncached prompt, and decoded)", "counter"
)
ENGINE_GENERATIONS = MetricSpec(
    "optserve_engine_generations",
    "Engine calls, by outcome (ok, deadline, too_long, unavailable, error)",
    "counter",
    ("outcome",),
)
ENGINE_PENDING = MetricSpec(
    "optserve_engine_pending",
    "Engine calls the engine replicas hold now (decoding, or waiting for the model), summed over replicas",
    "gauge",
)
COMPILER_EVALUATIONS = MetricSpec(
    "optserve_compiler_evaluations",
    "Candidates compiled by the compiler pools, by outcome (ok, error, crash: the worker died, timeout, "
    "deadline: cut by the request's deadline, stopped or never started)",
    "counter",
    ("outcome",),
)
# What each deployment records.
INGRESS = (REQUESTS, LATENCY, CACHE_LOOKUPS, CANDIDATES, DEADLINE_HITS, IMPROVEMENT)
ENGINE = (ENGINE_TOKENS, ENGINE_GENERATIONS, ENGINE_PENDING)
COMPILER = (COMPILER_EVALUATIONS,)
SPECS = INGRESS + ENGINE + COMPILER


class Recorder:
    """One replica's metrics (create it inside the replica: Ray Serve tags each series with it)."""

    def __init__(self, specs: Iterable[MetricSpec]):
        from ray.serve import metrics

        self._metrics = {}
        for spec in specs:
            if spec.kind == "counter":
                metric = metrics.Counter(spec.name, spec.description, tag_keys=spec.labels)
            elif spec.kind == "gauge":
                metric = metrics.Gauge(spec.name, spec.description, tag_keys=spec.labels)
            else:
                metric = metrics.Histogram(
                    spec.name, spec.description, boundaries=list(spec.buckets), tag_keys=spec.labels
                )
            self._metrics[spec.name] = metric

    def count(self, spec: MetricSpec, value: float = 1.0, **labels: str) -> None:
        if value > 0:  # Ray refuses to add nothing
            self._metrics[spec.name].inc(value, tags=labels)

    def set(self, spec: MetricSpec, value: float, **labels: str) -> None:
        self._metrics[spec.name].set(value, tags=labels)

    def observe(self, spec: MetricSpec, value: float, **labels: str) -> None:
        self._metrics[spec.name].observe(value, tags=labels)


_recorders: dict[tuple[str, ...], Recorder] = {}


def recorder(*specs: MetricSpec) -> Recorder:
    """This process's recorder of `specs` (one per process, made on first use)."""
    key = tuple(spec.name for spec in specs)
    if key not in _recorders:
        _recorders[key] = Recorder(specs)
    return _recorders[key]


def parse_exposition(text: str):
    """(sample name, labels, value) of each sample of a Prometheus text exposition (prometheus_client's
    parser: label escapes undone, NaN and +Inf read, comments skipped). ValueError if the text is not one."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            yield sample.name, dict(sample.labels), float(sample.value)


def _parsed(text: str) -> list[tuple[str, dict[str, str], float]] | None:
    """The samples of one agent's exposition; None if it does not parse (a cut answer), which is then
    skipped as an unreachable node is."""
    try:
        return list(parse_exposition(text))
    except ValueError:
        return None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sum_over_replicas(
    expositions: Iterable[str], application: str | None = None, specs: Iterable[MetricSpec] = SPECS
) -> str:
    """The `specs` metrics of Ray agents' expositions (of one Serve `application`, or all), summed over
    every label but their own."""
    specs = list(specs)
    kept = {_RAY_PREFIX + sample: labels for spec in specs for sample, labels in spec.samples().items()}
    totals: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(lambda: defaultdict(float))
    for text in expositions:
        for name, labels, value in _parsed(text) or ():
            if name in kept and application in (None, labels.get("application")):
                key = tuple((label, labels.get(label, "")) for label in kept[name])
                totals[name.removeprefix(_RAY_PREFIX)][key] += value
    lines = []
    for spec in specs:
        lines += [f"# HELP {spec.name} {spec.description}", f"# TYPE {spec.name} {spec.kind}"]
        for sample in spec.samples():
            series = totals.get(sample, {})
            for key in sorted(series, key=_series_order):
                label_text = ",".join(f'{label}="{_escape(value)}"' for label, value in key)
                labelled = f"{sample}{{{label_text}}}" if key else sample
                lines.append(f"{labelled} {series[key]!r}")
    return "\n".join(lines) + "\n"


def _series_order(key: tuple[tuple[str, str], ...]):
    """Label values in order, a bucket's `le` by number (+Inf last)."""
    return tuple((0, float(value), "") if label == "le" else (1, 0.0, value) for label, value in key)


def _read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=_SCRAPE_TIMEOUT_S) as answer:  # noqa: S310 (a node's own agent)
        return answer.read().decode()


async def cluster_metrics(application: str | None = None) -> str:
    """The optserve metrics of every live node's Ray metrics agent, summed (unreachable nodes, and answers
    that do not parse, skipped)."""
    import ray

    urls = [
        f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        for node in await asyncio.to_thread(ray.nodes)
        if node.get("Alive") and node.get("MetricsExportPort")
    ]
    texts = await asyncio.gather(*(asyncio.to_thread(_read, url) for url in urls), return_exceptions=True)
    return sum_over_replicas((text for text in texts if isinstance(text, str)), application)
