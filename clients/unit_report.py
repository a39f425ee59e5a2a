"""A unit's report: its record in OPTCC_LOG and in optcc's statistics (`optcc --stats`), its line on stderr
with OPTCC_VERBOSE, and the note that the service gave no answer (once per build, unless verbose).
"""

from __future__ import annotations

import sys

from optserve.clients.command_line import CompileJob
from optserve.clients.files import log_line
from optserve.clients.object_choice import UNTRUSTED, Choice
from optserve.clients.service_answer import clang_is_best
from optserve.clients.settings import OptccSettings


def unit_record(job: CompileJob, level: str) -> dict:
    return {"source": job.source, "output": job.output, "language": job.language, "level": level}


def report(
    settings: OptccSettings, job: CompileJob, level: str, response, choice: Choice, seconds: float, timing
) -> dict:
    """Log the unit's outcome (OPTCC_LOG, OPTCC_VERBOSE); the log record."""
    best = response.best
    chosen_text = choice.service_text if choice.winner == "service" else choice.clang_text
    record = {
        **unit_record(job, level),
        "outcome": "service",
        "winner": choice.winner,
        "clang_text": choice.clang_text,
        "service_text": choice.service_text,
        "saved_bytes": choice.clang_text - chosen_text,
        "kept_clang_because": choice.reason or None,
        "untrusted": choice.reason.startswith(UNTRUSTED),
        "objective": settings.objective,
        "ir_mode": settings.ir_mode,
        "strategy": settings.for_unit(timing.get("bitcode_bytes", 0))[0],
        "samples": settings.for_unit(timing.get("bitcode_bytes", 0))[1],
        "input_cost": response.input_cost,
        "oz_cost": response.oz_cost,
        "oz_skipped": response.oz_skipped,  # told clang's .text size, the deadline came before -Oz's compile
        "best_source": _source_name(best.source),  # client_baseline (clang's), oz, model, coreset_list, ...
        "cost": best.cost,
        "passes": list(best.passes),
        "pipeline": best.pipeline,
        "function_passes": dict(best.function_passes),  # source per_function: a list per function
        "model_id": response.model_id,
        "model_version": response.model_version,
        "cached": response.cached,
        "store_unit_hit": response.tuning.unit_hit,  # the tuning store held the whole unit
        "store_function_hits": response.tuning.function_hits,  # ... or lists of some of its functions
        "store_recorded": response.tuning.recorded,  # the unit was new to the store: recorded for tuning
        "store_settled": response.tuning.settled,  # tuned (or a profile's): optcc's object cache keeps it
        "deadline_hit": response.deadline_hit,
        "warning": response.warning,
        "object_bytes": len(choice.object_code),
        "seconds": round(seconds, 3),
        **timing,  # clang_s, ir_step_s, deadline_s, service_s: optcc's view of where the time went
        "service_total_s": round(response.timings.total_s, 3),
        "service_sample_s": round(response.timings.sample_s, 3),
        "service_compile_s": round(response.timings.compile_s, 3),
    }
    log(settings, record)
    if settings.verbose:
        other = "n/a" if choice.service_text is None else choice.service_text
        change = (chosen_text - choice.clang_text) / choice.clang_text if choice.clang_text else 0.0
        kept = f" ({choice.reason})" if choice.reason else ""
        note = f"; {response.warning}" if response.warning else ""
        if clang_is_best(response):
            service = "service: nothing smaller" + (f", its best {other} B" if other != "n/a" else "")
        else:
            service = f"service {other} B with {_describe(best)}"
        print(
            f"optcc: {job.source}: {choice.winner} wins{kept}: .text {chosen_text} B, {change:+.1%} vs "
            f"{settings.clang} {level} {choice.clang_text} B ({service} from {response.model_id}) in "
            f"{seconds:.2f} s{note}",
            file=sys.stderr,
        )
    return record


def _source_name(source: int) -> str:
    from optserve.v1 import optserve_pb2 as pb

    return pb.CandidateSource.Name(source).lower()


def _describe(candidate) -> str:
    if candidate.function_passes:
        return f"a list per function ({len(candidate.function_passes)} functions)"
    return " ".join(candidate.passes)


def notify_fallback(clang: str, level: str, reason: str, settings: OptccSettings | None, unreachable=False):
    verbose = settings is not None and settings.verbose
    from optserve.clients import build_state

    if build_state.first_fallback(unreachable) or verbose:
        once = "" if verbose else " (shown once per build)"
        print(f"optcc: {reason}; using {clang} {level} instead{once}", file=sys.stderr)


def log(settings: OptccSettings, record: dict) -> None:
    """The unit's record to OPTCC_LOG, and into optcc's statistics (`optcc --stats`)."""
    import os

    from optserve.clients import stats

    if settings.log_path:
        log_line(settings.log_path, record)
    stats.count(stats.stats_path(settings.cache_dir, dict(os.environ)), record)
