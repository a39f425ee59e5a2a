"""The generated dataset card: what is in the corpus, where it came from, and what the labels say.

`card_numbers` computes every number from the corpus files (build stats, shards, labels); `render_card`
turns them into DATASET_CARD.md, written next to the data. Nothing here is typed in by hand.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

from optserve.compiler.pipeline import OZ
from optserve.corpus.journal import read_jsonl, write_atomic
from optserve.corpus.label import OBJECTIVES, iter_labelled
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.split import SPLITS

PERCENTILES = (10, 50, 90, 99)


def _percentiles(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    picked = {f"p{p}": ordered[min(len(ordered) - 1, len(ordered) * p // 100)] for p in PERCENTILES}
    return {"min": ordered[0], **picked, "max": ordered[-1], "mean": round(statistics.fmean(ordered), 1)}


def card_numbers(layout: CorpusLayout) -> dict[str, Any]:
    """Every number of the card, as JSON-ready data."""
    stats = json.loads(layout.stats.read_text()) if layout.stats.exists() else {}
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    sizes: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"instructions": [], "bytes": []})
    licences: dict[str, set[str]] = defaultdict(set)
    for shard in layout.shards():
        for example in read_jsonl(shard):
            counts[example["source"]][example["split"]] += 1
            sizes[example["source"]]["instructions"].append(example["instructions"])
            sizes[example["source"]]["bytes"].append(example["bytes"])
            licences[example["source"]].add(example["licence"])
    numbers: dict[str, Any] = {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "counts": {
            s: {split: c[split] for split in SPLITS} | {"total": c.total()} for s, c in counts.items()
        },
        "split_totals": {split: sum(c[split] for c in counts.values()) for split in SPLITS},
        "sizes": {s: {k: _percentiles(v) for k, v in d.items()} for s, d in sizes.items()},
        "licences": {s: sorted(v) for s, v in licences.items()},
        "build": stats,
        "labels": _label_numbers(layout),
    }
    numbers["split_totals"]["total"] = sum(numbers["split_totals"].values())
    return numbers


def _label_numbers(layout: CorpusLayout) -> dict[str, Any]:
    """Per objective and source: -Oz cost, autotuner gain, share of plain -Oz, pass frequency, effort."""
    per: dict[str, dict[str, dict[str, Any]]] = {o: defaultdict(lambda: Counter()) for o in OBJECTIVES}
    passes: dict[str, Counter[str]] = {o: Counter() for o in OBJECTIVES}
    lengths: dict[str, Counter[int]] = {o: Counter() for o in OBJECTIVES}
    compilations: dict[str, list[int]] = {o: [] for o in OBJECTIVES}
    for example in iter_labelled(layout, SPLITS):
        for objective, label in example["labels"].items():
            for group in (example["source"], f"split:{example['split']}", "all"):
                c = per[objective][group]
                c["functions"] += 1
                c["unoptimized"] += label["unoptimized"]
                c["oz"] += label["oz"]
                c["autotune"] += label["autotune"]
                c["best"] += label["best"]
                c["improved"] += label["best"] < label["oz"]
                c["plain_oz"] += tuple(label["pass_list"]) == OZ
            compilations[objective].append(label["compilations"])
            if tuple(label["pass_list"]) != OZ:
                passes[objective].update(label["pass_list"])
                lengths[objective][len(label["pass_list"])] += 1
    result: dict[str, Any] = {}
    for objective in OBJECTIVES:
        groups = {}
        for group, c in sorted(per[objective].items()):
            oz = c["oz"] or 1
            groups[group] = {
                "functions": c["functions"],
                "mean_unoptimized": round(c["unoptimized"] / c["functions"], 2),
                "mean_oz": round(c["oz"] / c["functions"], 2),
                "autotune_gain_pct": round(100 * (c["oz"] - c["autotune"]) / oz, 3),
                "final_gain_pct": round(100 * (c["oz"] - c["best"]) / oz, 3),
                "improved_pct": round(100 * c["improved"] / c["functions"], 2),
                "plain_oz_pct": round(100 * c["plain_oz"] / c["functions"], 2),
            }
        if groups:
            result[objective] = {
                "groups": groups,
                "pass_frequency": dict(passes[objective].most_common()),
                "list_lengths": dict(sorted(lengths[objective].items())),
                "compilations": _percentiles(compilations[objective]),
            }
    return result


def render_card(numbers: dict[str, Any], command: str = "") -> str:
    build = numbers.get("build", {})
    settings = build.get("settings", {})
    lines = [
        "# optserve IR corpus: dataset card",
        "",
        f"Generated {numbers['generated']} by `optserve dataset card`"
        + (f" (corpus built with `{command}`)" if command else "")
        + ".",
        "Unoptimized LLVM IR, one function per module (with the declarations it needs), normalized",
        "(comments, debug metadata and attributes dropped). Split into train/val/test by SOURCE FILE.",
        "Every example's normalized-IR SHA-256 is in `manifest.tsv` (`optserve dataset check-leakage`).",
        *(
            ["", "**Snapshot**: built from the source files compiled so far; the build is not finished."]
            if build.get("complete") is False
            else []
        ),
        "",
        "## Sources and licences",
        "",
        "| source | package | licence |",
        "|---|---|---|",
    ]
    packages = build.get("packages", [])
    for source, licences in sorted(numbers["licences"].items()):
        package = next((p for p in packages if _package_matches(source, p)), "?")
        lines.append(f"| {source} | {package} | {', '.join(licences)} |")
    lines += [
        "",
        f"Compiled with `clang-19 {_flags(settings, 'clang_flags')}`; GCC tests also with "
        f"`{_flags(settings, 'gcc_compat_flags')}`; csmith `{_flags(settings, 'csmith_flags')}`, "
        f"seeds 1..{settings.get('csmith_programs', 0)}.",
        f"Kept: functions with >= {settings.get('min_instructions')} instructions and <= "
        f"{settings.get('max_bytes')} bytes of normalized IR; exact duplicates (normalized text) removed "
        f"corpus-wide; split by file: {settings.get('val_percent')}% val, "
        f"{settings.get('test_percent')}% test.",
        "",
        "## Counts per source and split",
        "",
        "| source | train | val | test | total |",
        "|---|---:|---:|---:|---:|",
    ]
    for source, c in sorted(numbers["counts"].items()):
        lines.append(f"| {source} | {c['train']} | {c['val']} | {c['test']} | {c['total']} |")
    t = numbers["split_totals"]
    lines += [f"| **all** | {t['train']} | {t['val']} | {t['test']} | {t['total']} |", ""]

    if build.get("sources"):
        lines += [
            "## Build yield per source",
            "",
            "| source | files | compiled | functions | trivial | too long | invalid | duplicate | kept |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for source, c in sorted(build["sources"].items()):
            kept = sum(v for k, v in c.items() if k.startswith("kept_"))
            lines.append(
                f"| {source} | {c.get('files', 0)} | {c.get('files_ok', 0)} | {c.get('functions', 0)} | "
                + " | ".join(
                    str(c.get(f"dropped_{why}", 0)) for why in ("trivial", "too_long", "invalid", "duplicate")
                )
                + f" | {kept} |"
            )
        lines.append("")

    lines += [
        "## Size distribution (normalized IR)",
        "",
        "| source | instructions p10 / p50 / p90 / p99 / max | bytes p10 / p50 / p90 / p99 / max |",
        "|---|---|---|",
    ]
    for source, d in sorted(numbers["sizes"].items()):
        cells = [
            " / ".join(str(d[k][f"p{p}"]) for p in PERCENTILES) + f" / {d[k]['max']}"
            for k in ("instructions", "bytes")
        ]
        lines.append(f"| {source} | {cells[0]} | {cells[1]} |")
    lines.append("")

    labels = numbers["labels"]
    if not labels:
        lines += ["## Labels", "", "No labels yet (`optserve dataset label`).", ""]
    for objective, data in labels.items():
        lines += [
            f"## Labels: {objective}",
            "",
            "Gain = cost saved relative to -Oz, summed over functions (autotune = per-function search;",
            "final = after broadcasting every unique best list within the split).",
            "",
            "| group | functions | mean -O0 | mean -Oz | autotune gain % | final gain % | improved % "
            "| plain -Oz % |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for group, g in data["groups"].items():
            lines.append(
                f"| {group} | {g['functions']} | {g['mean_unoptimized']} | {g['mean_oz']} | "
                f"{g['autotune_gain_pct']} | {g['final_gain_pct']} | {g['improved_pct']} | "
                f"{g['plain_oz_pct']} |"
            )
        comp = data["compilations"]
        lines += [
            "",
            f"Compilations per function: min {comp.get('min')}, median {comp.get('p50')}, "
            f"mean {comp.get('mean')}.",
            "Pass frequency in best lists other than plain -Oz: "
            + (", ".join(f"{name} {n}" for name, n in list(data["pass_frequency"].items())[:40]) or "none")
            + ".",
            "List lengths (non -Oz): "
            + (", ".join(f"{k}: {v}" for k, v in data["list_lengths"].items()) or "none")
            + ".",
            "",
        ]
    return "\n".join(lines)


def _flags(settings: dict[str, Any], key: str) -> str:
    return " ".join(settings.get(key, []))


def _package_matches(source: str, package: str) -> bool:
    prefix = {"llvm-transforms": "llvm-toolchain", "csmith": "csmith"}.get(source, "gcc-")
    return package.startswith(prefix)


def write_card(layout: CorpusLayout, command: str = "") -> dict[str, Any]:
    """Compute the numbers, write DATASET_CARD.md and card.json next to the data; return the numbers."""
    numbers = card_numbers(layout)
    write_atomic(layout.card, render_card(numbers, command) + "\n")
    write_atomic(layout.root / "card.json", json.dumps(numbers, indent=1) + "\n")
    return numbers
