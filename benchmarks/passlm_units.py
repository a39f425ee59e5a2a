"""Whole translation units of held-out real packages through the served Optimize flow, `.text` size.

Each sampled test unit (data/real/units, test split: packages never trained on) is answered by the service's
own `Optimizer` (serve/optimize/optimizer.py, in-process: the real engine and the crash-isolated compiler
pool, no Ray) for three requests, and compared with baselines at equal compile budgets:

  greedy       the default request (a unit longer than the model's context: lists for its largest functions,
               the coreset's first `engine.coreset_fallback_lists` lists, -Oz)
  priority@10  strategy priority, samples 10
  ranked_coreset@10  strategy ranked_coreset, samples 10 (the 10 coreset lists the model finds likeliest)
  coreset@10   strategy coreset, samples 10 (no model)
  random@10    the best of 10 random lists (fixed seed per unit)
  autotune@100 random search + minimization with 100 compiles (`optserve autotune --budget 100`)
  clang-19     `clang-19 -Oz -c` of the same IR: the user's compiler, which optcc keeps when it is smaller

All with the -Oz floor (the service never answers worse than its -Oz). Totals are sums of `.text` bytes;
"vs clang" applies optcc's rule (keep the smaller of the service's object and clang's).

    python benchmarks/passlm_units.py --units 40 --workers 2 [--json runs/passlm_units.json]
    python benchmarks/passlm_units.py --from-json runs/passlm_units.json   # the report again
    python benchmarks/passlm_units.py --units 100 --latency   # greedy latency on the long units, nothing else

`--latency` times only the default (greedy) request on the sampled units of at least LONG_UNIT_BYTES of IR,
each twice in a row, and reports the second (warm) answer's wall time and the model's share (sample_s): the
issue's "whole unit of 16k tokens < 2 s p50 with greedy". Run it on a quiet machine; the full run above
shares its cores with the baselines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import time
from datetime import date
from pathlib import Path

from tqdm import tqdm

from optserve.compiler.autotune import autotune, random_pass_list
from optserve.compiler.cache import ResultCache
from optserve.compiler.workers import CompilerPool
from optserve.config import load_settings, replica_config
from optserve.passlm.evaluation.held_out_units import clang_oz, sample_units
from optserve.serve import schemas
from optserve.serve.optimize.optimizer import Optimizer
from optserve.serve.replicas.deployments import PassOrderingEngine

REQUESTS = {
    "greedy": {},
    "priority@10": {"strategy": "priority", "samples": 10},
    "ranked_coreset@10": {"strategy": "ranked_coreset", "samples": 10},
    "coreset@10": {"strategy": "coreset", "samples": 10},
}
OBJECTIVE = "text_size"
LONG_UNIT_BYTES = 50_000  # IR bytes; 65 KB of a real unit was 17k tokens


async def measure(unit: dict, optimizer: Optimizer, pool: CompilerPool) -> dict:
    row: dict = {"id": unit["id"], "package": unit["package"], "bytes": len(unit["ir"]), "requests": {}}
    for name, fields in REQUESTS.items():
        request = schemas.OptimizeRequest(ir=unit["ir"], objective=OBJECTIVE, deadline_s=120, **fields)
        started = time.perf_counter()
        response = await optimizer.optimize(request)
        by_source: dict[str, int] = {}
        for candidate in response.candidates:
            if candidate.cost >= 0:
                by_source[candidate.source] = min(
                    by_source.get(candidate.source, candidate.cost), candidate.cost
                )
        row["oz"] = response.oz_cost
        row["requests"][name] = {
            "best": response.best.cost,
            "best_source": response.best.source,
            "by_source": by_source,
            "seconds": time.perf_counter() - started,
            "sample_s": response.timings.sample_s,
            "warning": response.warning[:200],
        }
    ir = unit["ir"]
    rng = random.Random(int(unit["id"][:8], 16))
    random_lists = [random_pass_list(rng, 8) for _ in range(10)]
    costs = [e.cost for e in await pool.evaluate_async(ir, random_lists, OBJECTIVE) if e.cost is not None]
    row["random@10"] = min([row["oz"], *costs])
    tuned = await asyncio.to_thread(autotune, ir, budget=100, objective=OBJECTIVE, seed=1, pool=pool)
    row["autotune@100"] = min(row["oz"], tuned.best_cost)
    row["clang"] = (await asyncio.to_thread(clang_oz, ir))[0]
    return row


async def greedy_latency(units: list[dict], optimizer: Optimizer) -> list[dict]:
    """Per long unit: the second of two default requests in a row (warm caches of the engine and pool)."""
    rows = []
    for unit in tqdm(units, desc="long units", unit="unit"):
        for _ in range(2):
            request = schemas.OptimizeRequest(ir=unit["ir"], objective=OBJECTIVE, deadline_s=120)
            started = time.perf_counter()
            response = await optimizer.optimize(request)
            seconds = time.perf_counter() - started
        rows.append(
            {
                "id": unit["id"],
                "bytes": len(unit["ir"]),
                "seconds": seconds,
                "sample_s": response.timings.sample_s,
                "best_source": response.best.source,
            }
        )
    return rows


def latency_report(rows: list[dict], meta: dict) -> str:
    def p50(key: str, chosen: list[dict]) -> str:
        return f"{statistics.median(r[key] for r in chosen):.2f} s" if chosen else "–"

    near_16k = [r for r in rows if r["bytes"] <= 70_000]  # 65 KB of a real unit was 17k tokens
    largest_kb = max((r["bytes"] for r in rows), default=0) // 1000
    made = f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']})"
    return "\n".join(
        [
            "# Greedy latency on whole long units (served Optimize flow, in-process)",
            "",
            f"{made}, model `{meta['model']}`.",
            f"{len(rows)} test units of {LONG_UNIT_BYTES // 1000}-{largest_kb} KB of IR; each asked twice in "
            "a row, the second answer timed.",
            "",
            "| units | count | wall p50 | max | model sampling p50 |",
            "|---|---:|---:|---:|---:|",
            f"| all long units | {len(rows)} | {p50('seconds', rows)} | "
            f"{max((r['seconds'] for r in rows), default=0):.2f} s | {p50('sample_s', rows)} |",
            f"| up to 70 KB of IR (about 13k-18k tokens) | {len(near_16k)} | {p50('seconds', near_16k)} | "
            f"{max((r['seconds'] for r in near_16k), default=0):.2f} s | {p50('sample_s', near_16k)} |",
            "",
        ]
    )


def report(rows: list[dict], meta: dict) -> str:
    rows = [r for r in rows if r.get("clang")]
    oz = sum(r["oz"] for r in rows)
    clang = sum(r["clang"] for r in rows)

    def saved(costs: list[int], base: int) -> str:
        return f"{100 * (base - sum(costs)) / base:.2f}%"

    asked = [name for name in REQUESTS if all(name in r["requests"] for r in rows)]  # older runs: fewer
    methods = {name: [r["requests"][name]["best"] for r in rows] for name in asked}
    methods["random@10"] = [r["random@10"] for r in rows]
    methods["autotune@100"] = [r["autotune@100"] for r in rows]
    lines = [
        "# Whole real translation units through the served Optimize flow (.text size)",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}), model `{meta['model']}`.",
        f"{len(rows)} test units (held-out packages: {', '.join(sorted({r['package'] for r in rows}))}), "
        f"units up to {meta['max_bytes'] // 1000} KB of IR; -Oz total {oz:,} B, "
        f"clang-19 -Oz total {clang:,} B.",
        "",
        "| method | saved vs service -Oz | vs clang-19 -Oz (keep smaller) | units better than clang | "
        "time p50 s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, costs in methods.items():
        kept = [min(c, r["clang"]) for c, r in zip(costs, rows, strict=True)]
        better = sum(c < r["clang"] for c, r in zip(costs, rows, strict=True))
        seconds = [r["requests"][name]["seconds"] for r in rows] if name in asked else []
        p50 = f"{statistics.median(seconds):.2f}" if seconds else "–"
        lines.append(f"| {name} | {saved(costs, oz)} | {saved(kept, clang)} | {better} | {p50} |")
    lines.append(f"| clang-19 -Oz | {saved([r['clang'] for r in rows], oz)} | 0.00% | – | – |")
    model_only = [r["requests"]["greedy"]["by_source"].get("model") for r in rows]
    read = [c for c in model_only if c is not None]
    wins = sum(
        r["requests"][name]["best_source"] == "model" for r in rows for name in ("greedy", "priority@10")
    )
    long_units = [r["requests"]["greedy"]["seconds"] for r in rows if r["bytes"] >= LONG_UNIT_BYTES]
    if long_units:
        lines += [
            "",
            f"Greedy wall time on the {len(long_units)} units of at least {LONG_UNIT_BYTES // 1000} KB of IR "
            f"(about 13k tokens and more): p50 {statistics.median(long_units):.2f} s, "
            f"max {max(long_units):.2f} s.",
        ]
    lines += [
        "",
        f"Model lists (greedy request, other than -Oz) compiled on {len(read)} of {len(rows)} units; a model "
        f"list was the service's best in {wins} of {2 * len(rows)} greedy/priority answers.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--units", type=int, default=40)
    parser.add_argument("--max-bytes", type=int, default=200_000, help="skip units with more IR than this")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--model-dir", type=Path, help="default: the configured model")
    parser.add_argument("--json", type=Path, help="write the raw rows here")
    parser.add_argument("--from-json", type=Path, help="only report rows written earlier")
    parser.add_argument(
        "--report", type=Path, help="default: docs/bench/passlm_units.md (--latency: _latency.md)"
    )
    parser.add_argument("--latency", action="store_true", help="only the greedy latency on the long units")
    args = parser.parse_args(argv)
    if args.report is None:
        args.report = Path(
            "docs/bench/passlm_units_latency.md" if args.latency else "docs/bench/passlm_units.md"
        )
    if args.from_json:
        data = json.loads(args.from_json.read_text())
    else:
        settings = load_settings()
        if args.model_dir:
            settings = settings.model_copy(
                update={"engine": settings.engine.model_copy(update={"model_dir": args.model_dir})}
            )
        data = asyncio.run(_run(args, settings))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(data, indent=1))
    text = (latency_report if data["meta"].get("latency") else report)(data["rows"], data["meta"])
    args.report.write_text(text)
    print(text)
    return 0


async def _run(args, settings) -> dict:
    units = sample_units(args.root, args.units, args.max_bytes)
    if args.latency:
        units = [u for u in units if len(u["ir"]) >= LONG_UNIT_BYTES]
    engine = PassOrderingEngine.func_or_class(replica_config(settings))  # the engine replica, here
    rows = []
    with CompilerPool(processes=args.workers, timeout_s=settings.compiler.candidate_timeout_s) as pool:

        async def metadata() -> schemas.ModelMetadata:
            return engine.metadata()

        # The engine replica in this process and the pool behind the Optimizer's seams (the service: handles).
        optimizer = Optimizer(settings, engine, pool, ResultCache(0), metadata)
        if args.latency:
            rows = await greedy_latency(units, optimizer)
        else:
            for unit in tqdm(units, desc="units", unit="unit"):
                rows.append(await measure(unit, optimizer, pool))
    await engine.close()
    command = f"python benchmarks/passlm_units.py --units {args.units} --workers {args.workers}"
    command += " --latency" if args.latency else ""
    meta = {
        "command": command + (f" --model-dir {args.model_dir}" if args.model_dir else ""),
        "date": date.today().isoformat(),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "model": engine.model_id,
        "max_bytes": args.max_bytes,
        "latency": args.latency,
    }
    return {"meta": meta, "rows": rows}


if __name__ == "__main__":
    raise SystemExit(main())
