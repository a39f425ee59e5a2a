"""optcc's statistics (`optcc --stats`, `--zero-stats`), as ccache's `-s`: what its units cost and saved.

One small JSON file of counters beside the object cache (`stats.json` in OPTCC_CACHE_DIR, else
$XDG_CACHE_HOME/optcc, else ~/.cache/optcc), updated once per unit under an exclusive `flock`, so the
processes of a `make -j` add up. A unit's log record (unit_report.py, object_cache.deliver) is what is
counted: statistics can never disagree with OPTCC_LOG. Statistics that cannot be written are skipped, never a
reason for a build to fail.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

STATS_FILE = "stats.json"

# counter -> what `--stats` calls it, in the order shown
COUNTERS = {
    "units": "units taken over",
    "from_object_cache": "  from optcc's object cache",
    "asked": "  asked the service",
    "not_asked": "  not asked (clang's object: its budget)",
    "fallbacks": "  service failed or unreachable (clang's object)",
    "service_won": "  service's object smaller than clang's",
    "clang_from_record": "    of which beat the record of clang's object (no clang back end)",
    "store_unit_hits": "  tuning store: whole unit tuned",
    "store_function_hits": "  tuning store: functions tuned (units without a unit entry)",
    "store_recorded": "  tuning store: units recorded for tuning",
    "kept_for_check": "  service's object refused by a check (clang's kept)",
    "untrusted": "    of which optcc's object checks (object_trust.py)",
    "saved_bytes": ".text bytes saved vs clang",
    "clang_text_bytes": ".text bytes of clang's objects (units asked)",
    "seconds": "seconds in optcc (units compiled, not from cache)",
}


def stats_path(cache_dir: str | None, env: dict[str, str]) -> Path:
    """Where the counters live: the object cache's folder (even with OPTCC_CACHE=0)."""
    if cache_dir:
        return Path(cache_dir) / STATS_FILE
    if env.get("OPTCC_CACHE_DIR"):
        return Path(env["OPTCC_CACHE_DIR"]) / STATS_FILE
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "optcc" / STATS_FILE


def increments(record: dict) -> dict[str, float]:
    """The counters one unit's log record adds."""
    outcome = record.get("outcome")
    if record.get("from_cache"):
        return {"units": 1, "from_object_cache": 1, "saved_bytes": record.get("saved_bytes") or 0}
    if outcome not in ("service", "not_asked", "fallback"):
        return {}
    added: dict[str, float] = {"units": 1, "seconds": record.get("seconds") or 0.0}
    if outcome == "not_asked":
        added["not_asked"] = 1
    elif outcome == "fallback":
        added["fallbacks"] = 1
    else:
        added |= {
            "asked": 1,
            "service_won": int(record.get("winner") == "service"),
            "clang_from_record": int(bool(record.get("clang_from_record"))),
            "store_unit_hits": int(bool(record.get("store_unit_hit"))),
            "store_function_hits": int(record.get("store_function_hits") or 0),
            "store_recorded": int(bool(record.get("store_recorded"))),
            "kept_for_check": int(bool(record.get("kept_clang_because"))),
            "untrusted": int(bool(record.get("untrusted"))),
            "saved_bytes": record.get("saved_bytes") or 0,
            "clang_text_bytes": record.get("clang_text") or 0,
        }
    return added


def count(path: Path, record: dict) -> None:
    """Add one unit's record to the counters at `path`."""
    added = increments(record)
    if not added:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            counters = _parse(handle.read())
            for name, value in added.items():
                counters[name] = counters.get(name, 0) + value
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(counters, sort_keys=True))
            handle.flush()
    except OSError:  # statistics are never a reason for a unit to fail
        pass


def read(path: Path) -> dict[str, float]:
    try:
        return _parse(path.read_text(encoding="utf-8"))
    except OSError:
        return {}


def zero(path: Path) -> None:
    path.unlink(missing_ok=True)


def report(counters: dict[str, float], path: Path) -> str:
    """`--stats`' text: every counter, and the saving as a share of clang's `.text` where units were asked."""
    lines = [f"stats file: {path}"]
    for name, label in COUNTERS.items():
        value = counters.get(name, 0)
        shown = f"{value:.1f}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"
        lines.append(f"{label:<62} {shown:>12}")
    clang_text = counters.get("clang_text_bytes", 0)
    if clang_text:
        share = 100.0 * counters.get("saved_bytes", 0) / clang_text
        lines.append(f"{'.text saved vs clang (units asked)':<62} {share:>11.2f}%")
    return "\n".join(lines)


def _parse(text: str) -> dict[str, float]:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:  # a file cut by a crash: counting starts again rather than failing
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int | float)} if isinstance(data, dict) else {}
