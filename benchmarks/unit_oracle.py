"""The ceiling of per-function lists on whole held-out units: each function module with its own searched list.

The service's per-function candidate for a long unit (fn@k, compiler/function_lists.py) gives each function of
the unit the best of -Oz and the coreset's first k lists, measured on its own module. A better model per
function can at best find what a search finds. This measures that ceiling, on the same test units and from the
same measurements as fn@k:

  modules   split each sampled test unit (passlm/evaluation/held_out_units.py: test split, fixed hash order)
            into its function modules (`split_unit`) and write them as a corpus to label;
  (label)   the labeller's local search from the coreset, `.text`, budget B per module (here or on the lent
            machine: `optserve dataset bundle`, corpus/label_remote.sh, `optserve dataset merge`);
  measure   per unit, through a CompilerPool: -Oz, clang-19 -Oz, and the per-function lists linked back:
              fn@k      best of -Oz and the coreset's first k lists per function (the seeds' measured costs)
              search    each function's own searched best list (the label), -Oz where it does not beat it
            each also `grouped` (the functions left on -Oz optimized together);
            whole     the unit's own label (data/real/units: one list for the whole unit, local search at
                      budget 1,000), alone and as a second candidate beside the per-function ones.
Every variant keeps the unit's -Oz when that is smaller (the service's floor); "vs clang" keeps clang's
object when smaller (optcc's rule).

    python benchmarks/unit_oracle.py modules --units 100 --max-bytes 200000 --out runs/unit_oracle
    optserve dataset label --corpus runs/unit_oracle --stage local --splits test --objectives text_size \
        --seeds data/labels/real/seeds/476fe3dd282b.json --budget 1000 --workers 2
    python benchmarks/unit_oracle.py measure --corpus runs/unit_oracle --rows runs/unit_oracle/rows.jsonl
    python benchmarks/unit_oracle.py measure --from-rows runs/unit_oracle/rows.jsonl   # the report again
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import platform
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from optserve.compiler.function_lists import FunctionLists, split_unit
from optserve.compiler.ir import IRError
from optserve.compiler.pipeline import OZ
from optserve.compiler.workers import CompilerPool
from optserve.corpus.coreset import known_costs
from optserve.corpus.journal import read_jsonl
from optserve.corpus.label import iter_labelled, searched_labels
from optserve.corpus.label_store import seed_sets
from optserve.corpus.layout import CorpusLayout
from optserve.passlm.evaluation.held_out_units import clang_oz, sample_units

OBJECTIVE = "text_size"
SHARD_SIZE = 200  # modules per examples shard


def module_id(unit_id: str, function: str) -> str:
    return hashlib.sha256(f"{unit_id}\0{function}".encode()).hexdigest()


def write_modules(units: list[dict], out: Path) -> dict:
    """The function modules of `units` as a corpus (test split) to label; returns counts."""
    layout = CorpusLayout(out)
    layout.examples_dir.mkdir(parents=True, exist_ok=True)
    records, unsplit = [], []
    for unit in tqdm(units, desc="splitting units", unit="unit"):
        try:
            parts = split_unit(unit["ir"])
        except IRError as err:
            unsplit.append({"unit": unit["id"], "error": str(err)[:200]})
            continue
        for name, ir in sorted(parts.functions.items()):
            records.append({
                "id": module_id(unit["id"], name), "split": "test", "source": "units", "ir": ir,
                "unit": unit["id"], "function": name, "package": unit["package"],
            })  # fmt: skip
    for index in range(0, len(records), SHARD_SIZE):
        shard = layout.examples_dir / f"test-unitmods-{index // SHARD_SIZE:03d}.jsonl"
        shard.write_text("".join(json.dumps(r) + "\n" for r in records[index : index + SHARD_SIZE]))
    counts = {
        "units": len(units),
        "unsplit": unsplit,
        "modules": len(records),
        "module_bytes": sum(len(r["ir"]) for r in records),
        "unit_ids": [u["id"] for u in units],
    }
    (out / "units.json").write_text(json.dumps(counts, indent=1))
    return counts


def module_choices(corpus: Path, coreset_counts: list[int]) -> dict[str, dict[str, dict]]:
    """unit -> function -> {"oz", "search": (list, cost), "fn@k": (list, cost)} from the labels."""
    layout = CorpusLayout(corpus)
    shards = layout.shards(("test",))
    searched = searched_labels(layout, shards)
    seeds = seed_sets(layout.labels_dir / "local")
    choices: dict[str, dict[str, dict]] = defaultdict(dict)
    for example in iter_labelled(layout, ("test",)):
        label = example["labels"].get(OBJECTIVE)
        raw = searched.get(example["id"], {}).get(OBJECTIVE)
        if label is None or label.get("best") is None or raw is None:
            continue
        known = known_costs(raw, seeds)
        coreset = seeds.get(raw.get("seeds", ""), [])
        oz = label["oz"]
        choice = {
            "oz": oz,
            "search": (tuple(label["pass_list"]), label["best"]) if label["best"] < oz else (OZ, oz),
        }
        for count in coreset_counts:
            measured = [
                (known[tuple(p)], i, tuple(p)) for i, p in enumerate(coreset[:count]) if tuple(p) in known
            ]
            cost, _, best = min(measured, default=(oz, 0, OZ))
            choice[f"fn@{count}"] = (best, cost) if cost < oz else (OZ, oz)
        choices[example["unit"]][example["function"]] = choice
    return choices


async def measure_unit(unit: dict, chosen: dict[str, dict], variants: list[str], pool: CompilerPool) -> dict:
    ir = unit["ir"]
    row: dict = {"id": unit["id"], "package": unit["package"], "bytes": len(ir), "functions": len(chosen)}
    (oz,) = await pool.evaluate_async(ir, [OZ], OBJECTIVE)
    row["oz"], row["clang"] = oz.cost, (await asyncio.to_thread(clang_oz, ir))[0]
    row["modules_oz"] = sum(c["oz"] for c in chosen.values())
    jobs, names = [], []
    for variant in variants:
        row[f"modules {variant}"] = sum(c[variant][1] for c in chosen.values())
        lists = {name: c[variant][0] for name, c in chosen.items() if c[variant][0] != OZ}
        row[f"changed {variant}"] = len(lists)
        for grouped in (False, True):
            jobs.append(FunctionLists.of(lists, grouped=grouped))
            names.append(variant + (" grouped" if grouped else ""))
    results = await pool.evaluate_async(ir, jobs, OBJECTIVE)
    row["v"] = {name: result.cost for name, result in zip(names, results, strict=True)}
    return row


def whole_unit_labels(root: Path, unit_ids: set[str]) -> dict[str, int]:
    """unit id -> the cost of its whole-unit label (`.text`), for the units labelled."""
    from optserve.corpus.real_corpus import RealCorpusLayout

    found = {}
    for example in iter_labelled(RealCorpusLayout(root).corpus("units"), ("test",)):
        label = example["labels"].get(OBJECTIVE)
        if example["id"] in unit_ids and label and label.get("best") is not None:
            found[example["id"]] = label["best"]
    return found


async def run(args: argparse.Namespace) -> tuple[list[dict], dict]:
    counts = [int(c) for c in args.counts.split(",")]
    variants = [f"fn@{c}" for c in counts] + ["search"]
    manifest = json.loads((args.corpus / "units.json").read_text())
    choices = module_choices(args.corpus, counts)
    modules_of: dict[str, int] = defaultdict(int)
    for shard in CorpusLayout(args.corpus).shards(("test",)):
        for record in read_jsonl(shard):
            modules_of[record["unit"]] += 1
    wanted = set(manifest["unit_ids"])
    units = [u for u in sample_units(args.units_root, len(wanted), args.max_bytes) if u["id"] in wanted]
    complete = [
        u for u in units if modules_of[u["id"]] and len(choices.get(u["id"], {})) == modules_of[u["id"]]
    ]
    whole = whole_unit_labels(args.units_root, {u["id"] for u in complete})
    rows = []
    with CompilerPool(processes=args.workers, timeout_s=args.timeout) as pool:
        for unit in tqdm(complete, desc="units", unit="unit"):
            rows.append(await measure_unit(unit, choices[unit["id"]], variants, pool))
            rows[-1]["whole"] = whole.get(unit["id"])
            if args.rows:
                with args.rows.open("a") as out:
                    out.write(json.dumps(rows[-1]) + "\n")
    meta = {
        "command": "python benchmarks/unit_oracle.py measure " + " ".join(args.argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()} ({platform.machine()})",
        "sampled": len(wanted),
        "complete": len(complete),
        "no_function": sum(1 for u in units if not modules_of[u["id"]]),
        "variants": variants,
    }
    return rows, meta


def report(rows: list[dict], meta: dict) -> str:
    rows = [r for r in rows if r.get("oz") is not None and r.get("clang") is not None]
    oz, clang_total = sum(r["oz"] for r in rows), sum(r["clang"] for r in rows)
    modules_oz = sum(r["modules_oz"] for r in rows)

    def pct(total: int, base: int) -> str:
        return f"{100 * (base - total) / base:.2f}%" if base else "–"

    def line(name: str, cost_of, modules: str = "", changed: str = "") -> str:
        """One variant: `cost_of(row)` is its unit cost (None: no candidate); the floor and optcc's rule."""
        costs = [cost_of(r) for r in rows]
        floor = [r["oz"] if c is None else min(c, r["oz"]) for c, r in zip(costs, rows, strict=True)]
        optcc = [min(f, r["clang"]) for f, r in zip(floor, rows, strict=True)]
        larger = sum(1 for c, r in zip(costs, rows, strict=True) if c is not None and c > r["oz"])
        saved = f"{pct(sum(floor), oz)} | {pct(sum(optcc), clang_total)}"
        return f"| {name} | {modules} | {saved} | {larger} | {changed} |"

    lines = [
        f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}).",
        f"{len(rows)} test units of {meta['sampled']} sampled ({meta.get('no_function', 0)} define no "
        "function; "
        f"{', '.join(sorted({r['package'] for r in rows}))}), {sum(r['functions'] for r in rows):,} function "
        f"modules; service -Oz {oz:,} B of `.text`, clang-19 -Oz {clang_total:,} B. Seconds: "
        f"{meta.get('seconds', '–')}.",
        "",
        "| variant | function modules vs their -Oz | unit vs service -Oz (floor) "
        "| vs clang-19 -Oz (optcc's rule) "
        "| units larger than -Oz before the floor | functions changed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for variant in meta["variants"]:
        modules = pct(sum(r[f"modules {variant}"] for r in rows), modules_oz)
        changed = f"{sum(r[f'changed {variant}'] for r in rows):,}"
        for name in (variant, variant + " grouped"):
            lines.append(line(name, lambda r, name=name: r["v"].get(name), modules, changed))
    if all(r.get("whole") is not None for r in rows):
        lines.append(line("whole-unit label (one list, search at budget 1,000)", lambda r: r["whole"]))
        for variant in meta["variants"]:
            names = (variant, variant + " grouped")

            def best(r, names=names):
                return min([r["whole"], *(r["v"][n] for n in names if r["v"].get(n) is not None)])

            lines.append(line(f"{variant} + {variant} grouped + whole-unit label", best))
    lines.append(f"| clang-19 -Oz alone vs service -Oz | | {pct(clang_total, oz)} | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    modules = sub.add_parser("modules", help="write the sampled units' function modules as a corpus to label")
    measure = sub.add_parser("measure", help="link the labelled modules back per unit and measure")
    for p in (modules, measure):
        p.add_argument("--units-root", type=Path, default=Path("data/real"))
        p.add_argument("--max-bytes", type=int, default=200_000)
    modules.add_argument("--units", type=int, default=100)
    modules.add_argument("--out", type=Path, required=True)
    measure.add_argument("--corpus", type=Path)
    measure.add_argument("--counts", default="10,100", help="coreset lists per function for fn@k")
    measure.add_argument("--workers", type=int, default=2)
    measure.add_argument("--timeout", type=float, default=120.0, help="seconds per compile")
    measure.add_argument("--rows", type=Path, help="append each unit's row here (JSON lines)")
    measure.add_argument("--from-rows", type=Path, help="report rows written by an earlier run")
    args = parser.parse_args(argv)
    args.argv = argv[1:]
    if args.command == "modules":
        counts = write_modules(sample_units(args.units_root, args.units, args.max_bytes), args.out)
        print(
            json.dumps(
                {k: v for k, v in counts.items() if k != "unit_ids"} | {"unsplit": len(counts["unsplit"])}
            )
        )
        return 0
    if args.from_rows:
        rows = [json.loads(line) for line in args.from_rows.read_text().splitlines()]
        meta = json.loads(args.from_rows.with_suffix(".meta.json").read_text())
    else:
        if args.corpus is None:
            parser.error("measure needs --corpus (or --from-rows)")
        started = time.perf_counter()
        rows, meta = asyncio.run(run(args))
        meta["seconds"] = round(time.perf_counter() - started)
        if args.rows:
            args.rows.with_suffix(".meta.json").write_text(json.dumps(meta))
    print(report(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
