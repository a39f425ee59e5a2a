"""Whole held-out units for the unit benchmarks (benchmarks/passlm_units.py, unit_gap.py, unit_oracle.py,
function_lists_units.py, outliner_sections.py): the same sample for all of them, clang's own size of a unit,
and a run's rows measured or read back.

The sample is the test split of the real corpus's units (data/real/units: packages never trained on) in a
fixed hash order, so every benchmark that asks for its first N units measures the same units.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import subprocess
import tempfile
import time
from pathlib import Path


def sample_units(root: Path, count: int, max_bytes: int) -> list[dict]:
    """The first `count` test units of the real corpus under `root` with at most `max_bytes` of IR, in the
    order of their ids' SHA-256."""
    from optserve.corpus.journal import read_jsonl
    from optserve.corpus.real_corpus import RealCorpusLayout

    corpus = RealCorpusLayout(root).corpus("units")
    units = [u for shard in corpus.shards(("test",)) for u in read_jsonl(shard) if len(u["ir"]) <= max_bytes]
    units.sort(key=lambda u: hashlib.sha256(u["id"].encode()).hexdigest())
    return units[:count]


def clang_oz(ir: str) -> tuple[int | None, float]:
    """clang-19 -Oz -c of the IR, the user's compiler (optcc keeps its object when it is smaller): its `.text`
    bytes (None when clang fails) and seconds (the budget optcc gives the service is 2x this)."""
    from optserve.compiler.cost import text_size

    with tempfile.TemporaryDirectory() as tmp:
        source, obj = Path(tmp) / "unit.ll", Path(tmp) / "unit.o"
        source.write_text(ir)
        started = time.perf_counter()
        done = subprocess.run(
            ["clang-19", "-Oz", "-c", "-x", "ir", str(source), "-o", str(obj), "-w"], capture_output=True
        )
        seconds = time.perf_counter() - started
        return (text_size(obj.read_bytes()) if done.returncode == 0 else None), seconds


def rows_and_meta(args: argparse.Namespace, run) -> tuple[list[dict], dict]:
    """A unit benchmark's rows and meta: read back with `--from-rows` (meta from its `.meta.json`), else
    measured by `asyncio.run(run(args))`, the meta written beside `--rows`."""
    if args.from_rows:
        rows = [json.loads(line) for line in args.from_rows.read_text().splitlines()]
        return rows, json.loads(args.from_rows.with_suffix(".meta.json").read_text())
    rows, meta = asyncio.run(run(args))
    if args.rows:
        args.rows.with_suffix(".meta.json").write_text(json.dumps(meta))
    return rows, meta
