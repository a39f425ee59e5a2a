"""`/metrics` with a replica killed mid-scrape (serve/observability/metrics.py): the summed counters never go
back, so Prometheus's `rate()` sees no false counter reset; the killed replica's counts stay in the sums and
the replacement's add to them. Scrapes run back to back in a thread while a replica is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx

from optserve.serve.observability.metrics import parse_exposition
from optserve.testing.service import DATA, METRICS_SETTLE_S, replica_pids, settled_metric, wait_for_metric

EVALUATIONS = "optserve_compiler_evaluations_total"
HTTP_OK = {"operation": "optimize", "protocol": "http", "code": "OK"}
SCRAPE_PAUSE_S = 0.2
REPLACEMENT_TIMEOUT_S = 180.0


class Scraper:
    """Scrapes `/metrics` back to back in a thread, keeping each answer's counters (sample -> value) and
    counting the scrapes that got no answer (the replica answering them was killed)."""

    def __init__(self, http: httpx.Client):
        self.http = http
        self.answers: list[dict[str, float]] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response = self.http.get("/metrics")
            except httpx.HTTPError:
                response = None
            if response is not None and response.status_code == 200:
                self.answers.append(
                    {f"{name}{sorted(labels.items())}": value
                     for name, labels, value in parse_exposition(response.text)
                     if name != "optserve_engine_pending"}  # the one gauge
                )  # fmt: skip
            else:
                self.failed += 1
            self._stop.wait(SCRAPE_PAUSE_S)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def decreases(self) -> list[str]:
        """Every counter that one answer shows lower than the answer before it."""
        return [
            f"{key}: {before[key]} -> {after.get(key, 0.0)}"
            for before, after in zip(self.answers, self.answers[1:], strict=False)
            for key in before
            if after.get(key, 0.0) < before[key]
        ]


def _optimize_once_back(http: httpx.Client, name: str) -> None:
    """An Optimize of `name`, tried until the killed replica's replacement answers it."""
    body = {"ir": (DATA / name).read_text(), "strategy": "greedy", "bypass_cache": True}
    deadline = time.monotonic() + REPLACEMENT_TIMEOUT_S
    while True:
        try:
            response = http.post("/v1/optimize", json=body)
            if response.status_code == 200 or time.monotonic() > deadline:
                break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
        time.sleep(1)  # UNAVAILABLE, or no answer, while Serve replaces the replica
    assert response.status_code == 200, response.text


def _kill_mid_scrape(http: httpx.Client, deployment: str, sample: str, **labels: str) -> tuple[float, float]:
    """Kill `deployment`'s replica while /metrics is scraped back to back, then Optimize once more on its
    replacement; `sample`'s value before the kill and after that Optimize. Fails if a counter went back."""
    _optimize_once_back(http, "add.ll")
    counted = settled_metric(http, sample, **labels)
    (replica,) = replica_pids(deployment)
    with Scraper(http) as scraper:
        time.sleep(METRICS_SETTLE_S)  # scrapes before the kill
        os.kill(replica, signal.SIGKILL)
        _optimize_once_back(http, "sum.ll")
        after = wait_for_metric(http, sample, counted + 1, **labels)
        time.sleep(2 * METRICS_SETTLE_S)  # more scrapes, after the replacement's first reports
    assert replica not in replica_pids(deployment)
    print(f"{deployment} killed: {len(scraper.answers)} scrapes answered, {scraper.failed} not; "
          f"{sample}{labels}: {counted} before, {after} after")  # fmt: skip
    assert scraper.decreases() == []
    return counted, after


def test_counters_never_go_back_when_a_compiler_replica_is_killed_mid_scrape(traced_service, http):
    counted, after = _kill_mid_scrape(http, "CompilerWorkers", EVALUATIONS, outcome="ok")
    assert after > counted  # the killed replica's counts stay, the replacement's add to them


def test_counters_never_go_back_when_the_ingress_answering_the_scrapes_is_killed(traced_service, http):
    counted, after = _kill_mid_scrape(http, "Ingress", "optserve_requests_total", **HTTP_OK)
    assert after > counted
