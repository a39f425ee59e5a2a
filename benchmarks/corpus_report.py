"""Write docs/bench/corpus.md from what was measured: the corpus build stats and the labelling sample.

Reads <corpus>/build_stats.json and <corpus>/card.json (written by `optserve dataset build`) and
runs/bench/corpus_label.json (written by benchmarks/corpus_label_throughput.py), and projects the cost
of labelling the whole corpus and the acceptance subset here and on the lent 16-core machine. Every
number comes from those files.

    python benchmarks/corpus_report.py --corpus data/corpus --label runs/bench/corpus_label.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

SPLITS = ("train", "val", "test")
ACCEPTANCE = {"train": 30_000, "val": 2_000, "test": 2_000}  # labelled functions each split must reach
REMOTE_CORES = 16
REMOTE_CALL_LABEL_S = 510  # a 600 s call minus unpacking llvmlite/bundle and packing labels


def _hours(cpu_s: float, cores: int) -> str:
    return f"{cpu_s / cores / 3600:.2f} h"


def _per_file_seconds(counts: dict) -> str:
    timed = counts.get("files_timed", 0)
    if not timed:
        return "n/a"
    partial = f" ({timed} of {counts['files']} timed)" if timed < counts["files"] else ""
    return f"{counts['worker_seconds'] / timed:.3f}{partial}"


def build_section(stats: dict, card: dict) -> list[str]:
    lines = [
        "## Corpus build (measured)",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores shared with ~5 other jobs (`nice -n 10`; "
        "heavily loaded; the load average is recorded with the labelling sample below). "
        "Command: `nice -n 10 optserve dataset build --workers 2` "
        f"(defaults: all sources, csmith seeds 1..{stats['settings']['csmith_programs']}, >= "
        f"{stats['settings']['min_instructions']} instructions, <= {stats['settings']['max_bytes']} bytes).",
        "",
        "| source | train | val | test | total |",
        "|---|---:|---:|---:|---:|",
    ]
    for source, c in sorted(card["counts"].items()):
        lines.append(f"| {source} | {c['train']} | {c['val']} | {c['test']} | {c['total']} |")
    t = card["split_totals"]
    lines += [
        f"| **all** | **{t['train']}** | **{t['val']}** | **{t['test']}** | **{t['total']}** |",
        "",
        "Yield per source (files compiled by clang-19 or parsed by llvmlite; functions after the split;",
        "what was dropped; worker s/file = wall time of the per-file work in a worker, busy machine):",
        "",
        "| source | files | compiled | functions | trivial | too long | invalid | duplicate | kept "
        "| kept/file | worker s/file |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for source, c in sorted(stats["sources"].items()):
        kept = sum(v for k, v in c.items() if k.startswith("kept_"))
        files = c.get("files", 0)
        compiled = c.get("files_ok", 0)
        dropped = [c.get(f"dropped_{why}", 0) for why in ("trivial", "too_long", "invalid", "duplicate")]
        lines.append(
            f"| {source} | {files} | {compiled} ({100 * compiled / max(files, 1):.0f}%) | "
            f"{c.get('functions', 0)} | "
            + " | ".join(map(str, dropped))
            + f" | {kept} | {kept / max(files, 1):.2f} | {_per_file_seconds(c)} |"
        )
    timed = sum(c.get("files_timed", 0) for c in stats["sources"].values())
    worker_s = sum(c.get("worker_seconds", 0) for c in stats["sources"].values())
    lines += [
        "",
        f"Build time: {worker_s / 3600:.2f} worker-hours for the {timed} files timed (per-file wall",
        "time in a worker on this busy machine; files compiled before timing was recorded show n/a),",
        f"{worker_s / max(timed, 1):.3f} s per file. Uncontended a file takes 0.05-0.2 s",
        "(clang-19 dominates).",
    ]
    if not stats.get("complete", True):
        lines += [
            "",
            "**This is a snapshot** (`--snapshot`): the build was still running; counts cover the files",
            "compiled so far, every source advancing at the same rate.",
        ]
    runs = stats.get("timing", {}).get("runs", [])
    if runs:
        lines += [
            "",
            "Completed build runs (`<corpus>/.build/runs.jsonl`; each resumes the journal of the last):",
            "",
            "| started (UTC) | files compiled | wall s | workers |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {r['started']} | {r['files']} | {r['compile_s']} | {r['workers']} |" for r in runs]
    sizes = card["sizes"]
    lines += [
        "",
        "Sizes (normalized IR): instructions p50 / p90 / max, bytes p50 / p90: "
        + "; ".join(
            f"{s} {d['instructions']['p50']} / {d['instructions']['p90']} / {d['instructions']['max']}, "
            f"{d['bytes']['p50']} / {d['bytes']['p90']} B"
            for s, d in sorted(sizes.items())
        )
        + ".",
        "",
    ]
    return lines


def label_section(bench: dict, card: dict) -> list[str]:
    per_source = bench["per_source"]
    total_function_s = sum(s["function_seconds"] for s in per_source.values())
    cpu_per_function = {
        source: bench["cpu_s"] * s["function_seconds"] / total_function_s / s["functions"]
        for source, s in per_source.items()
    }
    compilations_per_function = bench["compilations"] / bench["sample"]
    counts = card["counts"]
    corpus_total = sum(c["total"] for c in counts.values())
    full_cpu = sum(
        counts[s]["total"] * cpu_per_function.get(s, bench["cpu_s"] / bench["sample"]) for s in counts
    )
    mean_cpu = full_cpu / corpus_total
    acceptance_functions = sum(ACCEPTANCE.values())
    acceptance_cpu = acceptance_functions * mean_cpu
    functions_per_call = REMOTE_CORES * REMOTE_CALL_LABEL_S / mean_cpu

    objectives = bench["per_objective"]
    search_s = sum(v["function_seconds"] for v in objectives.values())
    # CPU per compilation of each objective: the run's CPU split by the objectives' search time.
    ms_of = {
        o: 1000 * bench["cpu_s"] * v["function_seconds"] / search_s / v["compilations"]
        for o, v in objectives.items()
    }
    ic_share = objectives["instruction_count"]["function_seconds"] / search_s
    improved = {o: v["improved"] / bench["sample"] for o, v in bench["per_objective"].items()}
    gains = {o: 100 * (v["oz"] - v["best"]) / max(v["oz"], 1) for o, v in bench["per_objective"].items()}
    ms = bench["cpu_ms_per_compilation"]

    lines = [
        "## Labelling throughput (measured) and the cost of a full run (projected)",
        "",
        f"Sample: {bench['sample']} training functions, round-robin over sources, budget {bench['budget']} "
        f"compilations per function and objective, both objectives, {bench['workers']} local workers "
        f"({bench['date']}; `{bench['command']}`).",
        "",
        f"- wall {bench['wall_s']} s, {bench['compilations']} compilations "
        f"({compilations_per_function:.0f} per function incl. baselines and minimization), "
        f"{bench['compilations_per_wall_s']} compilations/s on this busy machine; "
        f"{bench['failed']} functions failed",
        f"- CPU time of all processes of the run (driver, task workers, compiler workers; read from /proc): "
        f"{bench['cpu_s']} s = **{ms} ms CPU per compilation**, {bench['cpu_s'] / bench['sample']:.1f} s CPU "
        "per function; by objective (CPU split by search time): "
        + ", ".join(f"{o} {v:.2f} ms" for o, v in ms_of.items()),
        "- load average at the end of the run: "
        + " / ".join(f"{x:.1f}" for x in bench["load_average_at_end"]),
        "- in the sample: "
        + ", ".join(
            f"{o} improved on {100 * improved[o]:.0f}% of functions, {gains[o]:.2f}% saved vs -Oz"
            for o in gains
        ),
        "",
        "| source | functions | CPU s per function (share of the run's CPU by the source's search time) |",
        "|---|---:|---:|",
    ]
    lines += [
        f"| {s} | {int(v['functions'])} | {cpu_per_function[s]:.1f} |" for s, v in sorted(per_source.items())
    ]
    lines += [
        "",
        "Projection (autotune stage; CPU per function by source, weighted by the corpus' source mix; "
        f"{mean_cpu:.1f} CPU s per function on average):",
        "",
        "| what | functions | CPU hours | here (2 cores) | lent machine (16 cores) | 600 s calls there |",
        "|---|---:|---:|---:|---:|---:|",
        f"| acceptance set (30k train + 2k val + 2k test) | {acceptance_functions} | "
        f"{acceptance_cpu / 3600:.1f} | "
        f"{_hours(acceptance_cpu, 2)} | {_hours(acceptance_cpu, REMOTE_CORES)} | "
        f"{acceptance_functions / functions_per_call:.0f} |",
        f"| whole corpus | {corpus_total} | {full_cpu / 3600:.1f} | {_hours(full_cpu, 2)} | "
        f"{_hours(full_cpu, REMOTE_CORES)} | {corpus_total / functions_per_call:.0f} |",
        f"| acceptance set, instruction count only | {acceptance_functions} | "
        f"{ic_share * acceptance_cpu / 3600:.1f} | {_hours(ic_share * acceptance_cpu, 2)} | "
        f"{_hours(ic_share * acceptance_cpu, REMOTE_CORES)} | "
        f"{ic_share * acceptance_functions / functions_per_call:.0f} |",
        "",
        f"One 600 s call on the 16-core machine labels ~{functions_per_call:.0f} functions "
        f"({REMOTE_CALL_LABEL_S} s of labelling; REFERENCE.md measured its cores at 1.6-1.8 ms per",
        "instruction-count compile, close to this machine's 1.1-2.2 ms).",
        "",
        "Broadcast stage: every unique best list of a split is compiled on every function of that split, per "
        "objective: U x N compilations. With the sample's share of improved functions as an upper bound on "
        "unique lists, for N = 30,000 training functions:",
        "",
        "| objective | unique lists (<=) | compilations | CPU hours | lent machine "
        "| with `--broadcast-lists 100` |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for objective, share in improved.items():
        lists = share * ACCEPTANCE["train"]
        compilations = lists * ACCEPTANCE["train"]
        cpu_s = compilations * ms_of[objective] / 1000
        capped = 100 * ACCEPTANCE["train"] * ms_of[objective] / 1000
        lines.append(
            f"| {objective} | {lists:.0f} | {compilations:.2e} | {cpu_s / 3600:.0f} | "
            f"{_hours(cpu_s, REMOTE_CORES)} | {_hours(capped, REMOTE_CORES)} |"
        )
    lines += [
        "",
        "All-to-all broadcast, as in the thesis, is affordable only for small splits; for the training",
        "split use `--broadcast-lists K` (the K lists that were best most often, ties by total gain).",
        "",
    ]
    return lines


STATIC_TOP = """# Corpus: IR dataset for the pass-ordering model (issue 6)

Generated by `python benchmarks/corpus_report.py` on {date} from the files the build and the benchmark wrote.

## Commands

```
nice -n 10 optserve dataset build --workers 2      # fetch (once), compile, split, dedup, shard; resumable
optserve dataset label --shards 'train-0000?' ...  # autotune + broadcast; --ray ADDRESS for Ray; resumable
optserve dataset card                               # data/corpus/DATASET_CARD.md + card.json
optserve dataset check-leakage [EVAL.ll|DIR ...]    # manifest self-check; eval IR vs the training split
nice -n 10 python benchmarks/corpus_label_throughput.py --corpus data/corpus --sample 100
python benchmarks/corpus_report.py                  # this file
```

Sources are fetched with apt into `data/downloads/` (the `gcc-12-source` .deb with `apt-get download`;
`llvm-toolchain-19` with `apt-get source --download-only` through a private `deb-src` list built from the
archive already configured for apt, or `--debian-mirror`), and extracted under `data/sources/`. csmith
(`apt-get install csmith libcsmith-dev`) generates seeds 1..N with `--max-funcs 4 --max-block-depth 3
--max-expr-complexity 5`.

## Layout (data/corpus/)

```
examples/<split>-NNNNN.jsonl          1000 examples per shard, ordered by id (a fixed shuffle: any prefix of
                                      shards mixes all sources). Fields: id (SHA-256 of the normalized IR),
                                      source, package, file, function, licence, split, instructions, bytes, ir
functions/<source>/<split>/<id16>.ll  the same per-function modules as files (normalized, valid IR: each
                                      parses and verifies with llvmlite 0.47); e.g. the gcc.c-torture ones:
                                      data/corpus/functions/gcc-torture/{train,val,test}/*.ll
manifest.tsv                          id, split, source, file, function of every example (leakage checks)
build_stats.json, DATASET_CARD.md, card.json
labels/autotune/<shard>.jsonl         per function and objective: unoptimized, oz, best, pass_list,
                                      compilations, failed, seconds
labels/broadcast/<shard>.jsonl        best after broadcast (+ from: autotune|broadcast), lists-<split>.json
.build/files.jsonl, labels/*/<shard>.journal.jsonl   resume state
```

`optserve.corpus.label.iter_labelled(CorpusLayout(path), ("train",))` yields examples joined with their
final labels (the trainer's input).

## Rules

- One module per defined function (`optserve.compiler.ir.split_functions`: the function with external
  linkage, declarations of what it calls, the globals it reaches), normalized
  (`optserve.compiler.ir.normalize_ir`).
- Dropped: fewer than 4 instructions (trivial); normalized IR longer than 8,192 bytes. The limit stands
  for the model context: LLVM IR averages ~2 characters per token (thesis §4.3.1: 2 KB of IR per 1,024
  tokens), so 8 KB is ~4k prompt tokens; `bytes` is stored, so a trainer with a 2k context keeps
  `bytes <= 2048`.
- Deduplicated on the SHA-256 of the normalized text, corpus-wide; the first occurrence in file order wins
  (sources in the order gcc-torture, gcc-dg, gcc-common, llvm-transforms, csmith).
- Split by source file: SHA-256 of `source:path-in-package` mod 100 -> test (< 5), val (< 10), train. All
  functions of a file share a split; a duplicate is kept once, so no normalized function is in two splits.
- LLVM's .ll tests lose whole-line comments (RUN/CHECK); llvmlite (LLVM 20) parses them, and files it
  rejects are counted as parse errors. GCC tests compile with the -Wno-error flags REFERENCE.md lists.

## Labelling on the 16-core machine

It has no Ray and its own llvmlite is LLVM 22, so labels there use our llvmlite 0.47 (carried) on a process
pool, through `corpus/label_remote.sh`:

```
# here, once (REFERENCE.md):
test -f .carry/llvmlite047.tar.xz || { mkdir -p .carry && tar --exclude=__pycache__ --exclude=tests -cf - \\
  -C .venv/lib/python3.11/site-packages llvmlite | xz -9 -T2 > .carry/llvmlite047.tar.xz; }
# per call: a few shards (sized to one call, see the projection below) plus the labels so far
optserve dataset bundle --shards 'train-0000[0-1]' --out .carry/label_bundle.tar.xz
# run tool: command "corpus/label_remote.sh .carry/label_bundle.tar.xz autotune 510",
#           carry [".carry/llvmlite047.tar.xz", ".carry/label_bundle.tar.xz"], timeout_s 600
# here: merge what came back (finished shards and journals of unfinished ones)
tar xJf <files_at>/labels.tar.xz -C data/corpus
```

Repeat with the next shards (a cut-short shard's journal goes back in the next bundle and resumes). When the
autotune stage of a split is done, run the broadcast stage the same way (`... broadcast 510`), or here.
With Ray: `optserve dataset label --ray ADDRESS` runs one Ray task per function on the cluster.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--label", type=Path, default=Path("runs/bench/corpus_label.json"))
    parser.add_argument("--out", type=Path, default=Path("docs/bench/corpus.md"))
    args = parser.parse_args()

    stats = json.loads((args.corpus / "build_stats.json").read_text())
    card = json.loads((args.corpus / "card.json").read_text())
    lines = [STATIC_TOP.replace("{date}", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))]
    lines += build_section(stats, card)
    if args.label.exists():
        lines += label_section(json.loads(args.label.read_text()), card)
    else:
        lines += ["## Labelling throughput", "", f"Not measured yet ({args.label} missing).", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines[1:]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
