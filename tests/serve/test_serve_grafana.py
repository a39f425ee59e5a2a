"""serve/grafana/optserve.json, the Grafana dashboard: its queries name exactly the metrics
serve/observability/metrics.py defines (every one has a panel, no panel asks for one that is not exported),
with labels those metrics carry, under both names they are scraped by (the service's `/metrics`, and Ray's
metrics agents: `ray_` first)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from optserve.serve.observability import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "serve" / "grafana" / "optserve.json"
_METRIC = re.compile(r"\$\{source\}(\w+)")  # every metric of a query is named through the source variable
_MATCHER = re.compile(r"[{,]\s*(\w+)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")

_SAMPLES = {sample: labels for spec in metrics.SPECS for sample, labels in spec.samples().items()}
_SPEC_OF = {sample: spec.name for spec in metrics.SPECS for sample in spec.samples()}
_BASE = os.path.commonprefix([spec.name for spec in metrics.SPECS])  # "optserve_"


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(dashboard: dict) -> list[dict]:
    panels = []
    for panel in dashboard["panels"]:
        panels += [panel, *panel.get("panels", [])]  # a collapsed row holds its panels
    return panels


def _targets(dashboard: dict) -> list[dict]:
    return [target for panel in _panels(dashboard) for target in panel.get("targets", [])]


def _queried_samples(expr: str) -> list[str]:
    """The optserve sample names `expr` reads (as `/metrics` names them)."""
    assert "optserve" not in _METRIC.sub("", expr), f"a metric not named through ${{source}}: {expr}"
    return [_BASE.rstrip("_") + suffix for suffix in _METRIC.findall(expr)]


def test_every_query_reads_an_exported_sample():
    targets = _targets(_dashboard())
    assert targets
    for target in targets:
        samples = _queried_samples(target["expr"])
        assert samples, f"query reads no optserve metric: {target['expr']}"
        unknown = [sample for sample in samples if sample not in _SAMPLES]
        assert not unknown, (
            f"{unknown} not exported by serve/observability/metrics.py (exported: {sorted(_SAMPLES)})"
        )


def test_every_defined_metric_has_a_panel():
    samples = {sample for target in _targets(_dashboard()) for sample in _queried_samples(target["expr"])}
    queried = {_SPEC_OF[sample] for sample in samples if sample in _SPEC_OF}
    assert queried == {spec.name for spec in metrics.SPECS}


def test_queries_and_legends_use_only_labels_their_metrics_carry():
    for target in _targets(_dashboard()):
        expr = target["expr"]
        carried = {label for sample in _queried_samples(expr) for label in _SAMPLES.get(sample, ())}
        used = set(_MATCHER.findall(expr)) | set(_LEGEND_LABEL.findall(target.get("legendFormat", "")))
        grouped = [label.strip() for group in _GROUPING.findall(expr) for label in group.split(",")]
        used |= {label for label in grouped if label}
        assert used <= carried, f"labels {used - carried} are not on {_queried_samples(expr)}: {expr}"


def test_the_source_variable_names_both_scrape_targets():
    """`${source}` expands to the service's `/metrics` names and to the names on Ray's metrics agents."""
    (source,) = [v for v in _dashboard()["templating"]["list"] if v["name"] == "source"]
    values = {option["value"] + "_" for option in source["options"]}
    assert values == {_BASE, metrics._RAY_PREFIX + _BASE}
    assert source["current"]["value"] in {option["value"] for option in source["options"]}
    query_values = {part.split(" : ")[-1].strip() + "_" for part in source["query"].split(",")}
    assert query_values == values  # Grafana rebuilds the options from the query on load


def test_panels_have_unique_ids_and_use_the_datasource_variable():
    panels = _panels(_dashboard())
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
