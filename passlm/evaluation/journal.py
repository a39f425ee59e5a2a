"""The journal of an evaluation: one record per (function, method), with a fingerprint of what produced it,
so a killed run resumes without repeating finished work and a changed model never mixes with old results."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optserve.passlm.evaluation.candidates import Generated
from optserve.passlm.evaluation.methods import RANDOM_MAX_PASSES, EvalConfig, Method, coreset_of
from optserve.passlm.evaluation.metrics import FunctionCosts, MethodResult


def model_fingerprint(model_dir: Path) -> str:
    """What identifies a model's behaviour: its profile, config, tokenizer and weights."""
    digest = hashlib.sha256()
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.suffix in (".json", ".safetensors", ".model", ".txt"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def method_fingerprint(config: EvalConfig, method: Method, model: str | None) -> str:
    """Everything but the sample count that decides a method's candidates (results at a larger N serve a
    smaller one: candidates are drawn in the same order)."""
    settings: dict[str, Any] = {"method": method.name, "objective": config.objective}
    if method.uses_model:
        settings |= {"model": model, "deadline_s": config.deadline_s}
    if method.kind in ("priority", "ranked"):
        settings |= {"top_k": config.top_k, "parallel": config.parallel}
    if method.kind == "nucleus":
        settings |= {"top_p": config.top_p, "seed": config.seed, "draws": "per n"}
    if method.kind == "random":
        settings |= {"seed": config.seed, "max_passes": RANDOM_MAX_PASSES}
    if method.kind in ("coreset", "ranked"):
        settings |= {"coreset": coreset_of(config).version}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def journal_key(function_id: str, method: str) -> str:
    return f"{function_id}/{method}"


def reusable(record: dict[str, Any] | None, fingerprint: str, method: Method, samples: Sequence[int]) -> bool:
    """A journaled result answers this run if made the same way with at least as many samples."""
    if record is None or record["fingerprint"] != fingerprint:
        return False
    if record.get("skipped"):  # e.g. the prompt is too long: as true at any sample count
        return True
    if method.draws_per_n:
        return {str(n) for n in samples} <= set(record["by_draws"] or ())
    return record["samples"] >= method.draws(max(samples)) or record["exhausted"]


def result_at(record: dict[str, Any], n: int) -> MethodResult:
    """A journaled method result as read at n samples (prefixes are taken by `summarize`)."""
    chosen = record["by_draws"][str(n)] if record.get("by_draws") else range(len(record["costs"]))

    def pick(values: list) -> tuple:
        return tuple(values[i] if i < len(values) else None for i in chosen)

    return MethodResult(
        pick(record["costs"]), pick(record["predicted_before"]), pick(record["predicted_after"])
    )


def journal_record(
    function: dict,
    method: Method,
    fingerprint: str,
    generated: Generated,
    compiled,
    base: FunctionCosts,
    config: EvalConfig,
) -> dict[str, Any]:
    """The journal record of one method on one function: its candidates' costs, predictions and timings."""
    evaluations, compile_seconds = compiled
    costs = [e.cost for e in evaluations]
    errors = [e.error for e in evaluations if e.error]
    ok = [(e.cost, e.pass_list) for e in evaluations if e.cost is not None]
    return {
        "key": journal_key(function["id"], method.name),
        "function": function["id"],
        "method": method.name,
        "fingerprint": fingerprint,
        "samples": method.draws(config.max_samples),
        "unoptimized": base.unoptimized,
        "oz": base.oz,
        "costs": costs,
        "predicted_before": generated.predicted_before,
        "predicted_after": generated.predicted_after,
        "best_pass_list": " ".join(min(ok)[1]) if ok else None,
        "failed": len(errors),
        "first_error": errors[0][:300] if errors else None,
        "skipped": generated.skipped,
        "deadline_hit": generated.deadline_hit,
        "exhausted": generated.exhausted,
        "by_draws": {str(n): m for n, m in generated.by_draws.items()}
        if generated.by_draws is not None
        else None,
        "generate_s": round(generated.seconds, 4),
        "compile_s": round(compile_seconds, 4),
    }
