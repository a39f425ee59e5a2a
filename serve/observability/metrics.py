"""The service's metrics: counted in whichever replica sees the event, summed over the cluster at `/metrics`.

Each replica records through Ray Serve's metrics API (`ray.serve.metrics`); Ray's metrics agent on its node
exports them (Prometheus text, named `ray_<name>`, one series per replica process). HTTP `/metrics` of any
ingress replica reads every node's agent and answers the optserve metrics summed over replicas and nodes
(`cluster_metrics`): one scrape sees the whole service, whichever replica the route picks. Per-replica series
stay available from Ray's agents. Label values are bounded: operation names, status codes, outcomes.

Replicas report every `metrics_report_interval_ms` of Ray (serve/server.py sets 2 s on the Ray it starts), so
a count shows at `/metrics` that long after the event.

The sums never go back (`CounterMemory`): Ray's agent keeps a dead replica's counters (Ray 2.60 never evicts
them; tests/observability/test_observability_metrics.py kills replicas mid-scrape), but an agent that does not
answer one scrape (a timeout, a cut answer, its node gone) would take its replicas' counts out of that
scrape's sums, which Prometheus's `rate()` reads as a counter reset: a false spike of the whole remaining
total on the next scrape.
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
Sample = tuple[str, dict[str, str], float]  # name, labels, value


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
TOOLCHAIN_ASKS = MetricSpec(
    "optserve_toolchain_asks",
    "The host's toolchain (LLVM version, pass vocabulary) asked of a compiler worker by an ingress replica, "
    "by when (startup: before the replica is ready; request: a request waited for it, the warm-up failed)",
    "counter",
    ("when",),
)
# What each deployment records.
INGRESS = (REQUESTS, LATENCY, CACHE_LOOKUPS, CANDIDATES, DEADLINE_HITS, IMPROVEMENT, TOOLCHAIN_ASKS)
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


def _parsed(text: str) -> list[Sample] | None:
    """The samples of one agent's exposition; None if it does not parse (a cut answer), which is then
    skipped as an unreachable node is."""
    try:
        return list(parse_exposition(text))
    except ValueError:
        return None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class CounterMemory:
    """Every cumulative series (a counter; a histogram's buckets, sum and count) scraped so far, one per
    replica (its labels name it), so that sums of them never go back.

    A series absent from a scrape (its agent did not answer) counts at its last value; one that comes back
    lower than it was (its agent restarted and counts again from zero) is a reset of that series alone:
    what it had counted stays as its offset, as Prometheus's `rate()` would read a reset of it. The memory
    grows with the replicas that ever ran, as Ray's agents' own series do."""

    def __init__(self):
        self._last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._offset: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)

    def carried(self, samples: Iterable[Sample], cumulative: set[str]) -> list[Sample]:
        """`samples` with each series named in `cumulative` at its offset plus its value, and those of
        earlier scrapes that this one lacks at their last value."""
        answered, other = {}, []
        for name, labels, value in samples:
            if name in cumulative:
                answered[(name, tuple(sorted(labels.items())))] = value
            else:
                other.append((name, labels, value))
        for key, value in answered.items():
            if value < self._last.get(key, 0.0):
                self._offset[key] += self._last[key]
            self._last[key] = value
        carried = [(name, dict(labels), self._offset[(name, labels)] + last)
                   for (name, labels), last in self._last.items()]  # fmt: skip
        return other + carried


_memories: dict[str | None, CounterMemory] = defaultdict(CounterMemory)  # this process's, per application


def sum_over_replicas(
    expositions: Iterable[str],
    application: str | None = None,
    specs: Iterable[MetricSpec] = SPECS,
    memory: CounterMemory | None = None,
) -> str:
    """The `specs` metrics of Ray agents' expositions (of one Serve `application`, or all), summed over
    every label but their own; with `memory`, cumulative series of earlier scrapes that these lack too."""
    specs = list(specs)
    kept = {_RAY_PREFIX + sample: labels for spec in specs for sample, labels in spec.samples().items()}
    samples = [
        (name, labels, value)
        for text in expositions
        for name, labels, value in _parsed(text) or ()
        if name in kept and application in (None, labels.get("application"))
    ]
    if memory is not None:
        cumulative = {_RAY_PREFIX + s for spec in specs if spec.kind != "gauge" for s in spec.samples()}
        samples = memory.carried(samples, cumulative)
    totals: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(lambda: defaultdict(float))
    for name, labels, value in samples:
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
    that do not parse, skipped: their counters count at what this process last read from them)."""
    import ray

    urls = [
        f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        for node in await asyncio.to_thread(ray.nodes)
        if node.get("Alive") and node.get("MetricsExportPort")
    ]
    texts = await asyncio.gather(*(asyncio.to_thread(_read, url) for url in urls), return_exceptions=True)
    answered = (text for text in texts if isinstance(text, str))
    return sum_over_replicas(answered, application, memory=_memories[application])
