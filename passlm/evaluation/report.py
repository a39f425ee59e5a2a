"""The results: the journal read back into the table's rows and timings, and the markdown report."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from optserve.corpus.journal import Journal
from optserve.objectives import Objective
from optserve.passlm.evaluation.journal import (
    journal_key,
    method_fingerprint,
    model_fingerprint,
    result_at,
    reusable,
)
from optserve.passlm.evaluation.methods import EvalConfig
from optserve.passlm.evaluation.metrics import FunctionCosts, summarize

_UNITS = {Objective.INSTRUCTION_COUNT: "instructions", Objective.TEXT_SIZE: "bytes of .text"}


def collect(config: EvalConfig, functions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows of the table (and timings) from the journal, over the functions every method could run on."""
    needs_model = any(m.uses_model for m in config.methods)
    model = model_fingerprint(config.model_dir) if needs_model else None
    done = Journal(config.journal_path).records(repair=False)
    per_method: dict[str, list[dict[str, Any]]] = {m.name: [] for m in config.methods}
    kept: list[FunctionCosts] = []
    skipped: dict[str, int] = {}
    missing = 0
    for function in functions:
        records = {m.name: done.get(journal_key(function["id"], m.name)) for m in config.methods}
        if not all(
            reusable(r, method_fingerprint(config, m, model), m, config.samples)
            for m, r in zip(config.methods, records.values(), strict=True)
        ):
            missing += 1
            continue
        reasons = [r["skipped"] for r in records.values() if r["skipped"]]
        if reasons:
            reason = reasons[0].split(":")[0]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        first = next(iter(records.values()))
        kept.append(FunctionCosts(first["unoptimized"], first["oz"]))
        for name, record in records.items():
            per_method[name].append(record)
    rows = []
    for method in config.methods:
        for n in method.sample_counts(config.samples):
            results = [result_at(r, n) for r in per_method[method.name]]
            rows.append(asdict(summarize(method.name, n, kept, results)))
    timings = {m.name: _timing(per_method[m.name]) for m in config.methods if per_method[m.name]}
    return {
        "functions": len(kept),
        "selected": len(functions),
        "not_evaluated_yet": missing,
        "excluded": skipped,
        "oz_total": sum(f.oz for f in kept),
        "unoptimized_total": sum(f.unoptimized for f in kept),
        "rows": rows,
        "timings": timings,
        "autotuner_compilations": _mean(r.get("compilations", 0) for r in per_method.get("autotuner", [])),
    }


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _timing(records: list[dict[str, Any]]) -> dict[str, Any]:
    totals = sorted(r["generate_s"] + r["compile_s"] for r in records)
    return {
        "generate_s": _mean(r["generate_s"] for r in records),
        "compile_s": _mean(r["compile_s"] for r in records),
        "total_median_s": totals[len(totals) // 2],
        "total_p90_s": totals[min(len(totals) - 1, int(0.9 * len(totals)))],
        "total_max_s": totals[-1],
        "candidates": _mean(len(r["costs"]) for r in records),
        "no_candidate": sum(not r["costs"] for r in records),
        "deadline_hits": sum(r["deadline_hit"] for r in records),
    }


def machine_description() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def _cell(value: float | None, digits: int = 2, suffix: str = "%") -> str:
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def report(data: dict[str, Any], plot_path: str | None = None) -> str:
    """The markdown report: Table 6.1 of the thesis as rows method@n, plus timings and definitions."""
    meta, results = data["meta"], data["results"]
    excluded = ", ".join(f"{count} {reason}" for reason, count in results["excluded"].items()) or "none"
    lines = [
        "# Pass-ordering model: evaluation (thesis Table 6.1)",
        "",
        f"- Command: `{meta['command']}`",
        f"- Machine: {meta['machine']}",
        f"- Date: {meta['date']}",
        f"- Model: `{meta['model_dir']}` ({meta['model_id']}, fingerprint {meta['model_fingerprint']}), "
        f"backend {meta['backend']}",
        f"- Corpus: `{meta['corpus_dir']}`, split {meta['split']}, objective {meta['objective']}; "
        f"{results['functions']} functions evaluated of {results['selected']} selected "
        f"(excluded: {excluded}; not evaluated yet: {results['not_evaluated_yet']})",
        f"- -Oz total {results['oz_total']} {_UNITS.get(meta['objective'], '')}, unoptimized total "
        f"{results['unoptimized_total']}",
        f"- This run: {meta['run']['computed']} (function, method) results computed in "
        f"{meta['run']['seconds']:.0f} s ({meta['run']['reused']} reused from the journal)",
        "",
        "| method@n | improvement over -Oz | with -Oz backup | improved | regressed | validity "
        "| MAPE before | MAPE after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    autotuner_budget = results.get("autotuner_compilations")
    for row in results["rows"]:
        name = f"{row['method']}@{row['samples']}"
        if row["method"] == "autotuner" and autotuner_budget:
            name = f"autotuner ({autotuner_budget:.0f} compilations)"
        lines.append(
            f"| {name} | {row['improvement']:.2f}% | {row['improvement_with_oz']:.2f}% "
            f"| {row['improved']} | {row['regressed']} | {_cell(row['validity'], 1)} "
            f"| {_cell(row['mape_before'], 1)} | {_cell(row['mape_after'], 1)} |"
        )
    lines += [
        "",
        "Wall time per function (generation once at the largest n, then compiling every candidate; "
        "generate/compile: means; total = generate + compile per function; compilation overlaps the next "
        "function's generation):",
        "",
        "| method | generate s | compile s | total s median | p90 | max | candidates | no candidate "
        "| deadline hit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, timing in results["timings"].items():
        lines.append(
            f"| {name} | {timing['generate_s']:.3f} | {timing['compile_s']:.3f} "
            f"| {timing['total_median_s']:.3f} | {timing['total_p90_s']:.3f} | {timing['total_max_s']:.3f} "
            f"| {timing['candidates']:.1f} | {timing['no_candidate']} | {timing['deadline_hits']} |"
        )
    lines += [
        "",
        "Improvement: sum over functions of (-Oz cost - best cost among the first n candidates) / sum of -Oz "
        "costs. Without backup a function with no compiling candidate counts at its unoptimized cost; with "
        "backup the -Oz candidate is included, so nothing regresses. n: priority sampling's first n "
        "samples, random's first n lists, nucleus' unique candidates among n draws (drawn per n). "
        "Improved/regressed: functions better/worse than -Oz without backup. Validity: share of candidates "
        "that compile. MAPE: the instruction counts the model writes, before vs the unoptimized count, "
        "after vs the measured cost of that pass list. Autotuner: the label's best "
        "cost. No candidate: functions where the method returned no pass list.",
    ]
    if plot_path:
        lines += ["", f"![improvement vs samples]({Path(plot_path).name})"]
    return "\n".join(lines) + "\n"


def model_id(model_dir: Path) -> str:
    from optserve.engine.profile import ModelProfile

    return ModelProfile.load(model_dir).model_id
