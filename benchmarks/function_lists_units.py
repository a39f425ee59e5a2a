"""Per-function pass lists on whole real translation units (held-out packages), `.text` size, offline.

For each test unit (data/real/units, test split), through a CompilerPool (crash-isolated workers):
  -Oz          the service's whole-unit -Oz (the floor)
  per-fn@k     each function (with the static helpers only it calls) gets the best of -Oz and the coreset's
               first k `text_size` lists, measured on that function's module alone; the chosen lists are
               applied and linked as one job (compiler/function_lists.py) and measured on the whole unit;
               the smaller of that and the unit's -Oz is kept
  whole@k      (--whole) the best of -Oz and the first k coreset lists, each on the whole unit (what the
               service compiles today for a unit longer than the model's context)
  clang-19     `clang-19 -Oz -c` of the same IR; "vs clang" applies optcc's rule (keep the smaller object)

Time per unit: the compile seconds the method needs on one core, one compile after another (-Oz included),
so it does not depend on the pool's size or the machine's load from other jobs as much as wall time does.

    python benchmarks/function_lists_units.py --units 20 --workers 2 --rows runs/fl_units.jsonl
    python benchmarks/function_lists_units.py --from-rows runs/fl_units.jsonl     # the report again
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from optserve.compiler.function_lists import split_unit
from optserve.compiler.ir import IRError
from optserve.compiler.pipeline import OZ
from optserve.compiler.unit_search import measure_functions
from optserve.compiler.workers import CompilerPool
from optserve.corpus.journal import journaled
from optserve.engine.coreset import Coreset
from optserve.passlm.evaluation.held_out_units import clang_oz, rows_and_meta, sample_units

OBJECTIVE = "text_size"
COUNTS = (1, 3, 10)  # default lists per function / per unit; --counts asks for others


async def measure(
    unit: dict,
    lists: list[tuple[str, ...]],
    pool: CompilerPool,
    whole: bool,
    counts: tuple[int, ...] = COUNTS,
) -> dict:
    ir = unit["ir"]
    started = time.perf_counter()
    (oz,) = await pool.evaluate_async(ir, [OZ], OBJECTIVE)
    row: dict = {"id": unit["id"], "package": unit["package"], "file": unit["file"], "bytes": len(ir)}
    row.update(oz=oz.cost, oz_s=oz.seconds, clang=(await asyncio.to_thread(clang_oz, ir))[0], per_fn={})
    try:
        parts = await asyncio.to_thread(split_unit, ir)
    except IRError as err:
        row["split_error"] = str(err)[:300]
        parts = None
    if parts is not None:
        measured = await measure_functions(parts, [OZ, *lists], OBJECTIVE, pool)
        row["functions"] = len(parts.functions)
        row["helpers"] = sum(len(m) - 1 for m in parts.members.values())
        for count in counts:
            chosen = measured.choose(count + 1)
            (linked,) = await pool.evaluate_async(ir, [chosen], OBJECTIVE)
            row["per_fn"][str(count)] = {
                "cost": linked.cost,
                "error": (linked.error or "")[:300],
                "changed": sum(p != OZ for _, p in chosen.lists),
                "seconds": oz.seconds + measured.compile_seconds(count + 1) + linked.seconds,
            }
    if whole:
        evaluations = await pool.evaluate_async(ir, lists, OBJECTIVE)
        row["whole"] = {
            str(count): {
                "cost": min(
                    [c for c in (e.cost for e in evaluations[:count]) if c is not None], default=None
                ),
                "seconds": oz.seconds + sum(e.seconds for e in evaluations[:count]),
            }
            for count in counts
        }
    row["wall_s"] = time.perf_counter() - started
    return row


def _kept(row: dict, method: str, count: int) -> int:
    """The service's answer: the method's unit if it compiled and is smaller, else the unit's -Oz."""
    if method == "both":  # what the service ranks for a long unit: per-function and whole-unit candidates
        return min(_kept(row, "per_fn", count), _kept(row, "whole", count))
    result = row.get(method, {}).get(str(count))
    cost = result["cost"] if result else None
    return row["oz"] if cost is None else min(cost, row["oz"])


def _seconds(row: dict, method: str, count: int) -> float:
    if method == "both":  # -Oz counted once
        return _seconds(row, "per_fn", count) + _seconds(row, "whole", count) - row["oz_s"]
    return row[method][str(count)]["seconds"]


def report(rows: list[dict], meta: dict) -> str:
    rows = [r for r in rows if r.get("clang") is not None and r.get("oz") is not None]
    oz, clang = sum(r["oz"] for r in rows), sum(r["clang"] for r in rows)

    def pct(total: int, base: int) -> str:
        return f"{100 * (base - total) / base:.2f}%"

    packages = ", ".join(sorted({r["package"] for r in rows}))
    lines = [
        "| method | saved vs service -Oz | vs clang-19 -Oz (optcc keeps the smaller) | units smaller than "
        "-Oz | answer larger than clang (optcc keeps clang's) | compile s per unit p50 / p90 / max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    methods = [("per_fn", "per-fn")]
    if all("whole" in r for r in rows):
        methods += [("whole", "whole"), ("both", "per-fn + whole")]
    counts = sorted({int(c) for r in rows for c in r.get("per_fn", {})}) or list(COUNTS)
    for method, label in methods:
        for count in counts:
            kept = [_kept(r, method, count) for r in rows]
            optcc = [min(k, r["clang"]) for k, r in zip(kept, rows, strict=True)]
            better = sum(k < r["oz"] for k, r in zip(kept, rows, strict=True))
            larger = sum(k > r["clang"] for k, r in zip(kept, rows, strict=True))
            seconds = sorted(_seconds(r, method, count) for r in rows if "per_fn" in r and r["per_fn"])
            timing = (
                f"{statistics.median(seconds):.2f} / {seconds[int(0.9 * (len(seconds) - 1))]:.2f} / "
                f"{seconds[-1]:.2f}"
                if seconds
                else "–"
            )
            lines.append(
                f"| {label}@{count} | {pct(sum(kept), oz)} | {pct(sum(optcc), clang)} | {better} | {larger} "
                f"| {timing} |"
            )
    oz_optcc = [min(r["oz"], r["clang"]) for r in rows]
    lines.append(f"| -Oz (service) | 0.00% | {pct(sum(oz_optcc), clang)} | – | "
                 f"{sum(r['oz'] > r['clang'] for r in rows)} | – |")  # fmt: skip
    split_errors = [r for r in rows if "split_error" in r]
    link_errors = sum(1 for r in rows for v in r.get("per_fn", {}).values() if v["error"])
    walls = sorted(r["wall_s"] for r in rows)
    linked = [r for r in rows if r.get("per_fn", {}).get("10", {}).get("cost") is not None]
    raw, raw_oz = [r["per_fn"]["10"]["cost"] for r in linked], [r["oz"] for r in linked]
    header = [
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}); coreset {meta['coreset']}.",
        f"{len(rows)} test units (held-out packages: {packages}), up to {meta['max_bytes'] // 1000} KB "
        "of IR each; "
        f"service -Oz total {oz:,} B of `.text`, clang-19 -Oz total {clang:,} B.",
        f"Functions: {sum(r.get('functions', 0) for r in rows):,} function modules "
        f"({sum(r.get('helpers', 0) for r in rows):,} static helpers joined their only caller's module). "
        f"Units that could not be split (aliases): {len(split_errors)}; linked units that failed: "
        f"{link_errors}. Without the -Oz floor, per-fn@10 alone: {pct(sum(raw), sum(raw_oz))} vs -Oz.",
        f"Wall time per unit, all methods and clang together, pool of {meta['workers']} on a shared machine: "
        f"p50 {statistics.median(walls):.2f} s, max {walls[-1]:.2f} s.",
        "",
    ]
    return "\n".join(header + lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--units", type=int, default=20, help="test units, in a fixed hash order")
    parser.add_argument("--max-bytes", type=int, default=1_000_000, help="skip units with more IR")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--whole", action="store_true", help="also the whole-unit coreset baseline")
    parser.add_argument("--rows", type=Path, help="append rows here (resumable: units there are skipped)")
    parser.add_argument("--from-rows", type=Path, help="only report rows written earlier")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per compile job")
    parser.add_argument(
        "--counts", default=",".join(map(str, COUNTS)), help="lists per function / unit, e.g. 1,10,100"
    )
    args = parser.parse_args(argv)
    args.counts = tuple(sorted({int(c) for c in args.counts.split(",")}))
    rows, meta = rows_and_meta(args, _run)
    print(report(rows, meta))
    return 0


async def _run(args) -> tuple[list[dict], dict]:
    coreset = Coreset.load(Path("models/coreset/coreset.json"))
    lists = list(coreset.first(OBJECTIVE, max(args.counts)))
    if len(lists) < max(args.counts):
        raise SystemExit(f"the coreset has {len(lists)} {OBJECTIVE} lists, fewer than --counts asks for")
    units = sample_units(args.root, args.units, args.max_bytes)
    with CompilerPool(processes=args.workers, timeout_s=args.timeout) as pool:

        async def one(unit: dict) -> dict:
            return await measure(unit, lists, pool, args.whole, args.counts)

        rows = await journaled(tqdm(units, desc="units", unit="unit"), one, args.rows)
    command = f"python benchmarks/function_lists_units.py --units {args.units} --workers {args.workers}"
    command += f" --max-bytes {args.max_bytes}" + (" --whole" if args.whole else "")
    if args.counts != COUNTS:
        command += f" --counts {','.join(map(str, args.counts))}"
    meta = {
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores shared with other jobs",
        "coreset": coreset.version,
        "max_bytes": args.max_bytes,
        "workers": args.workers,
    }
    return rows, meta


if __name__ == "__main__":
    raise SystemExit(main())
