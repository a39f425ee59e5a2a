"""Where per-function lists lose on whole units, and variants that win it back (`.text`, held-out units).

For each test unit (data/real/units, test split, fixed hash order), through a CompilerPool:
  oz / clang        the service's whole-unit -Oz and `clang-19 -Oz -c` of the same IR
  modules           every function module (compiler/function_lists.py) at -Oz and at the best of -Oz and
                    the coreset's first k `text_size` lists, each alone: the gain per isolated function
  split-oz          every function module at -Oz, linked: what the split alone costs
  fn@k              per function the best of -Oz + k lists (measured alone), every function its own module
                    (the served `per_function` candidate today)
  fn@k grouped      the same choice, but the functions that stay on -Oz are one module, optimized together
                    (FunctionLists.grouped): -Oz's inliner and IPO keep working across them
  ctx@k             grouped, each changed function checked in the unit: only the functions whose list alone
                    makes the unit smaller than its -Oz keep their list (one unit compile per changed
                    function, up to --ctx-max of them)
  fn@k refined      (--refine) fn@k, then one round of local search per function: its best list with one
                    more pass appended (unit_search.REFINE_PASSES, 10 compiles per function), kept if smaller
  whole@k           the best of -Oz and k coreset lists, each on the whole unit
Every variant keeps the unit's -Oz when that is smaller; "vs clang" keeps clang's object when smaller (optcc).
Seconds: compile seconds on one core, one compile after another (what the variant needs, -Oz included).
With several `--coreset` files, every list variant is measured with each, in the same run on the same units;
the second and later are named `<file stem>:fn@k`, `<file stem>:whole@k`, ...

    python benchmarks/unit_gap.py --units 100 --rows runs/unit_gap.jsonl
    python benchmarks/unit_gap.py --units 100 --coreset models/coreset/coreset.json \
        --coreset models/coreset/units.json --ctx-max 0 --counts 10 --rows runs/unit_gap_units.jsonl
    python benchmarks/unit_gap.py --from-rows runs/unit_gap.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from optserve.compiler.function_lists import FunctionLists, split_unit
from optserve.compiler.ir import IRError
from optserve.compiler.pipeline import OZ
from optserve.compiler.unit_search import FunctionCosts, measure_functions, refine_functions
from optserve.compiler.workers import CompilerPool
from optserve.corpus.journal import journaled
from optserve.engine.coreset import Coreset
from optserve.passlm.evaluation.held_out_units import clang_oz, rows_and_meta, sample_units

OBJECTIVE = "text_size"


async def _one(pool: CompilerPool, ir: str, job) -> tuple[int | None, float]:
    (result,) = await pool.evaluate_async(ir, [job], OBJECTIVE)
    return result.cost, result.seconds


def _module_sums(measured: FunctionCosts, count: int) -> int:
    total = 0
    for costs in measured.costs.values():
        known = [c for c in costs[: count + 1] if c is not None]
        total += min(known) if known else 0
    return total


async def measure(
    unit: dict,
    coresets: dict[str, list[tuple[str, ...]]],
    counts: list[int],
    pool,
    ctx_max: int,
    refine: bool,
) -> dict:
    """The unit's row: -Oz, clang and split-oz once, every list variant with each coreset's lists (by tag)."""
    ir = unit["ir"]
    started = time.perf_counter()
    row: dict = {"id": unit["id"], "package": unit["package"], "bytes": len(ir), "v": {}}
    row["oz"], row["oz_s"] = await _one(pool, ir, OZ)
    row["clang"], row["clang_s"] = await asyncio.to_thread(clang_oz, ir)
    try:
        parts = await asyncio.to_thread(split_unit, ir)
    except IRError as err:
        row["split_error"] = str(err)[:200]
        parts = None
    else:
        row["functions"] = len(parts.functions)
        row["v"]["split-oz"] = list(await _one(pool, ir, FunctionLists.of({})))
    for tag, lists in coresets.items():
        await _measure_lists(row, ir, parts, tag, lists, counts, pool, ctx_max, refine)
    row["wall_s"] = time.perf_counter() - started
    return row


async def _measure_lists(row, ir, parts, tag, lists, counts, pool, ctx_max: int, refine: bool) -> None:
    """One coreset's variants into `row` (names prefixed by `tag`): whole@k, and with `parts` fn@k & co."""
    whole = await pool.evaluate_async(ir, lists[: max(counts)], OBJECTIVE)
    for count in counts:
        costs = [e.cost for e in whole[:count] if e.cost is not None]
        row["v"][f"{tag}whole@{count}"] = [min(costs, default=None), sum(e.seconds for e in whole[:count])]
    if parts is None:
        return
    measured = await measure_functions(parts, [OZ, *lists], OBJECTIVE, pool)
    row["modules_oz"] = _module_sums(measured, 0)
    for count in counts:
        row[f"{tag}modules@{count}"] = _module_sums(measured, count)
        search_s = measured.compile_seconds(count + 1)
        for grouped in (False, True):
            chosen = measured.choose(count + 1)
            chosen = FunctionLists.of(dict(chosen.lists), grouped=grouped)
            cost, seconds = await _one(pool, ir, chosen)
            row["v"][f"{tag}fn@{count}" + (" grouped" if grouped else "")] = [cost, search_s + seconds]
        if refine:
            refined, refine_s = await refine_functions(parts, measured.best(count + 1), OBJECTIVE, pool)
            row[f"{tag}refined_modules@{count}"] = sum(cost for _, cost in refined.values())
            chosen_refined = FunctionLists.of({n: p for n, (p, _) in refined.items()})
            cost, seconds = await _one(pool, ir, chosen_refined)
            row["v"][f"{tag}fn@{count} refined"] = [cost, search_s + refine_s + seconds]
        changed = chosen.own(list(parts.functions))
        row[f"{tag}changed@{count}"] = len(changed)
        if ctx_max and len(changed) <= ctx_max:
            lists_of = dict(chosen.lists)
            alone = await pool.evaluate_async(
                ir, [FunctionLists.of({n: lists_of[n]}, grouped=True) for n in changed], OBJECTIVE
            )
            ctx_s = search_s + sum(e.seconds for e in alone)
            wins = [(n, e.cost) for n, e in zip(changed, alone, strict=True) if e.ok and e.cost < row["oz"]]
            if len(wins) > 1:
                keep = {n: lists_of[n] for n, _ in wins}
                cost, seconds = await _one(pool, ir, FunctionLists.of(keep, grouped=True))
                cost = min([cost, *(c for _, c in wins)], key=lambda c: c if c is not None else 1 << 62)
                ctx_s += seconds
            else:
                cost = wins[0][1] if wins else row["oz"]
            row["v"][f"{tag}ctx@{count}"] = [cost, ctx_s]


def _combine(rows: list[dict], parts: list[str]) -> None:
    """Add the variant 'a + b + ...' to every row: the smallest of those that compiled, their seconds summed,
    except that fn@k and fn@k grouped share their per-function search: the second link is counted as long
    as the split-oz link (the rows keep each variant's total only)."""
    for r in rows:
        measured = [r["v"][p] for p in parts if p in r["v"]]
        costs = [c for c, _ in measured if c is not None]
        seconds = sum(s for _, s in measured)
        if sum(_kind(p).startswith("fn") and p in r["v"] for p in parts) == 2:
            seconds = seconds - r["v"][parts[1]][1] + r["v"]["split-oz"][1]
        r["v"][" + ".join(parts)] = [min(costs, default=None), seconds]


def _kind(name: str) -> str:
    """The variant without its coreset tag: `units:fn@10` -> `fn@10`."""
    return name.rsplit(":", 1)[-1]


def report(rows: list[dict], meta: dict) -> str:
    rows = [r for r in rows if r.get("clang") is not None and r.get("oz") is not None]
    oz, clang_total = sum(r["oz"] for r in rows), sum(r["clang"] for r in rows)

    def pct(total: int, base: int) -> str:
        return f"{100 * (base - total) / base:.2f}%" if base else "–"

    names = sorted({name for r in rows for name in r["v"]}, key=lambda n: (_kind(n).split("@")[0], n))
    tags = meta.get("tags", [""])
    for tag, count in ((t, c) for t in tags for c in meta["counts"]):  # the best of several per unit
        for plain in ([f"fn@{count}", f"fn@{count} grouped"], [f"fn@{count}", f"whole@{count}"],
                      [f"fn@{count}", f"fn@{count} grouped", f"whole@{count}"], ["split-oz", f"fn@{count}"],
                      [f"fn@{count} refined", f"whole@{count}"],
                      [f"fn@{count} refined", f"fn@{count} grouped", f"whole@{count}"]):  # fmt: skip
            parts = [p if p == "split-oz" else tag + p for p in plain]
            if not any(parts[0] in r["v"] for r in rows):
                continue
            _combine(rows, parts)
            names.append(" + ".join(parts))
    split = [r for r in rows if "functions" in r]
    modules_oz = sum(r["modules_oz"] for r in split)
    clang_p50 = statistics.median(r["clang_s"] for r in rows)
    lines = [
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}); coreset {meta['coreset']}.",
        f"{len(rows)} test units ({', '.join(sorted({r['package'] for r in rows}))}); service -Oz total "
        f"{oz:,} B of `.text`, clang-19 -Oz total {clang_total:,} B; {len(rows) - len(split)} not split; "
        f"{sum(r['functions'] for r in split):,} function modules. clang-19 -Oz -c seconds per unit "
        f"p50 {clang_p50:.2f}, total {sum(r['clang_s'] for r in rows):.1f}.",
        "",
        "Isolated function modules (split units only): "
        + ", ".join(
            f"{t}best of -Oz + {c} lists saves {pct(sum(r[f'{t}modules@{c}'] for r in split), modules_oz)}"
            for t in tags
            for c in meta["counts"]
        )
        + "".join(
            f", {t}best of -Oz + {c} lists refined saves "
            f"{pct(sum(r[f'{t}refined_modules@{c}'] for r in split), modules_oz)}"
            for t in tags
            for c in meta["counts"]
            if all(f"{t}refined_modules@{c}" in r for r in split)
        )
        + f" of their -Oz total ({modules_oz:,} B; the split units' -Oz: "
        f"{sum(r['oz'] for r in split):,} B).",
        "",
        "| variant | raw vs -Oz (no floor) | saved vs service -Oz | vs clang-19 -Oz (optcc) | units < -Oz "
        "| answer > clang | compile s per unit p50 / p90 / max | total s | x clang |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    clang_s = sum(r["clang_s"] for r in rows)
    for name in names:
        kept, raw, raw_oz, seconds = [], 0, 0, []
        for r in rows:
            cost, secs = r["v"].get(name, [None, 0.0])
            if _kind(name).startswith(("fn", "split", "ctx")) and name not in r["v"]:
                cost = None
            if cost is not None:
                raw, raw_oz = raw + cost, raw_oz + r["oz"]
            kept.append(r["oz"] if cost is None else min(cost, r["oz"]))
            seconds.append(r["oz_s"] + (secs or 0.0))
        optcc = [min(k, r["clang"]) for k, r in zip(kept, rows, strict=True)]
        better = sum(k < r["oz"] for k, r in zip(kept, rows, strict=True))
        larger = sum(k > r["clang"] for k, r in zip(kept, rows, strict=True))
        seconds.sort()
        saved = f"{pct(raw, raw_oz)} | {pct(sum(kept), oz)} | {pct(sum(optcc), clang_total)}"
        lines.append(
            f"| {name} | {saved} | {better} | {larger} | {statistics.median(seconds):.2f} / "
            f"{seconds[int(0.9 * (len(seconds) - 1))]:.2f} / {seconds[-1]:.2f} | {sum(seconds):.0f} "
            f"| {sum(seconds) / clang_s:.1f} |"
        )
    oz_optcc = pct(sum(min(r["oz"], r["clang"]) for r in rows), clang_total)
    oz_larger, oz_s = sum(r["oz"] > r["clang"] for r in rows), sum(r["oz_s"] for r in rows)
    lines.append(f"| -Oz (service) | 0.00% | 0.00% | {oz_optcc} | – | {oz_larger} | – | {oz_s:.0f} | – |")
    return "\n".join(lines) + "\n"


def _merged(rows: list[dict], meta: dict, path: Path) -> tuple[list[dict], dict]:
    """The rows of units measured in both runs, with the other run's variants and module sums added."""
    other = {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}
    merged = []
    for row in rows:
        if row["id"] in other:
            extra = other[row["id"]]
            merged.append({**extra, **row, "v": {**extra["v"], **row["v"]}})
    other_meta = json.loads(path.with_suffix(".meta.json").read_text())
    meta = {**meta, "command": f"{meta['command']}` and `{other_meta['command']}"}
    return merged, meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--units", type=int, default=100, help="test units, in a fixed hash order")
    parser.add_argument("--max-bytes", type=int, default=200_000, help="skip units with more IR")
    parser.add_argument("--counts", default="10,30", help="coreset lists per function (and whole unit)")
    parser.add_argument("--ctx-max", type=int, default=16, help="most changed functions checked in the unit")
    parser.add_argument("--refine", action="store_true", help="also fn@k refined (one local-search round)")
    parser.add_argument(
        "--coreset", type=Path, action="append", help="coreset file (repeat to compare; default: bundled)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows", type=Path, help="append rows here (resumable: units there are skipped)")
    parser.add_argument("--from-rows", type=Path, help="only report rows written earlier")
    parser.add_argument(
        "--merge", type=Path, help="with --from-rows: add the variants of another run's rows (same units)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per compile job")
    args = parser.parse_args(argv)
    rows, meta = rows_and_meta(args, _run)
    if args.from_rows and args.merge:
        rows, meta = _merged(rows, meta, args.merge)
    print(report(rows, meta))
    return 0


async def _run(args) -> tuple[list[dict], dict]:
    counts = [int(c) for c in args.counts.split(",")]
    paths = args.coreset or [Path("models/coreset/coreset.json")]
    loaded = {("" if i == 0 else f"{path.stem}:"): Coreset.load(path) for i, path in enumerate(paths)}
    coresets = {tag: list(coreset.first(OBJECTIVE, max(counts))) for tag, coreset in loaded.items()}
    units = sample_units(args.root, args.units, args.max_bytes)
    meta = {
        "command": f"python benchmarks/unit_gap.py --units {args.units} --max-bytes {args.max_bytes} "
        f"--counts {args.counts} --ctx-max {args.ctx_max} --workers {args.workers}"
        + "".join(f" --coreset {path}" for path in args.coreset or ())
        + (" --refine" if args.refine else ""),
        "date": "started " + datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} {platform.processor() or ''}, {__import__('os').cpu_count()} cores "
        "shared with other jobs",
        "coreset": ", ".join(f"{tag or 'default: '}{c.version}" for tag, c in loaded.items()),
        "tags": list(coresets),
        "counts": counts,
    }
    if args.rows:  # written first too: the rows of a run stopped early can be reported (--from-rows)
        args.rows.with_suffix(".meta.json").write_text(json.dumps(meta))
    with CompilerPool(processes=args.workers, timeout_s=args.timeout) as pool:

        async def one(unit: dict) -> dict:
            return await measure(unit, coresets, counts, pool, args.ctx_max, args.refine)

        rows = await journaled(tqdm(units, desc="units", unit="unit"), one, args.rows)
    return rows, meta


if __name__ == "__main__":
    raise SystemExit(main())
