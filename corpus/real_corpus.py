"""Captured units of real packages (`real_packages.py`) -> two corpora: whole translation units, functions.

Per package (resumable: one processed file per package under `<root>/processed/`), every distinct captured
unit that is the package's own code (configure/CMake/meson probes dropped) is
  1. stripped of debug info with `opt-19 -strip-debug` (Debian builds pass -g; a size build usually does not,
     and debug records do not change `.text`), read by llvmlite (LLVM 20) into IR text: the **unit example**,
     keyed by the SHA-256 of its normalized form;
  2. split per function and normalized as the older corpus does (`corpus/functions.py` rules): the
     **function examples**.
Then `assemble` deduplicates by normalized hash across packages, assigns splits **by package**
(`package_split`), keeps a hash seen in several splits only in the most held-out one (test, then val), and
writes each granularity as a `CorpusLayout` (examples shards + manifest.tsv), so the labelling, bundling and
leakage tools of the corpus package work on it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import subprocess
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optserve.corpus.functions import DropRules, function_examples, ir_hash
from optserve.corpus.journal import write_atomic
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.real_packages import PACKAGES, CaptureLayout, check_allowed
from optserve.corpus.split import SPLITS

SOURCE = "debian"
GRANULARITIES = ("units", "functions")
FUNCTION_RULES = DropRules(min_instructions=4, max_bytes=32768)
UNIT_MAX_BYTES = 4 << 20  # stripped IR text; larger units are counted but not kept (too slow to label)
PROBE_MARKERS = ("/CMakeFiles/", "/meson-private/", "/conftest")
EXAMPLES_PER_SHARD = {"units": 250, "functions": 4000}
STRIP_DEBUG = "opt-19"


def package_split(package: str) -> str:
    """Split by package, stratified by kind: per kind, the first package in hash order is test, the next val.

    A pure function of the package list, so every machine assigns the same split.
    """
    kind = PACKAGES.get(package, "other")
    same_kind = sorted((p for p, k in PACKAGES.items() if k == kind), key=_package_rank)
    position = same_kind.index(package) if package in same_kind else len(same_kind)
    return "test" if position == 0 else "val" if position == 1 else "train"


def _package_rank(package: str) -> str:
    return hashlib.sha256(f"optserve-real-split:{package}".encode()).hexdigest()


@dataclass(frozen=True)
class RealCorpusLayout:
    root: Path  # the capture root (data/real)

    def processed(self, package: str) -> Path:
        return self.root / "processed" / f"{package}.jsonl.xz"

    def corpus(self, granularity: str) -> CorpusLayout:
        return CorpusLayout(self.root / granularity)


def is_probe(source: str) -> bool:
    """A configure/CMake/meson test program rather than the package's code."""
    return any(marker in source for marker in PROBE_MARKERS) or Path(source).name.startswith("conftest")


def process_unit(task: tuple[str, str, str, str]) -> dict[str, Any]:
    """One captured unit -> its unit example and function examples (runs in a worker process)."""
    from optserve.compiler.ir import IRError, instruction_count, normalize_ir, parse_ir, split_functions

    bitcode_path, package, file, bitcode_sha = task
    with tempfile.TemporaryDirectory(prefix="optserve-strip-") as scratch:
        stripped = Path(scratch) / "unit.bc"
        step = subprocess.run(
            [STRIP_DEBUG, "-strip-debug", bitcode_path, "-o", str(stripped)], capture_output=True, timeout=600
        )
        if step.returncode != 0:
            return {"status": "strip_error", "error": step.stderr.decode(errors="replace")[-300:]}
        try:
            unit_ir = parse_ir(stripped.read_bytes(), max_bytes=1 << 30)
            normalized_unit = normalize_ir(unit_ir)
        except IRError as err:
            return {"status": "parse_error", "error": str(err)[:300]}
    base = {"source": SOURCE, "package": package, "kind": PACKAGES.get(package, "other"), "file": file}
    unit = {
        **base,
        "id": ir_hash(normalized_unit),
        "bitcode_sha256": bitcode_sha,
        "function": "",
        "instructions": instruction_count(unit_ir),
        "bytes": len(unit_ir.encode()),
        "ir": unit_ir if len(unit_ir.encode()) <= UNIT_MAX_BYTES else None,
    }
    examples, dropped = function_examples(split_functions(unit_ir), FUNCTION_RULES)
    functions = [{**base, **example} for example in examples]
    return {"status": "ok", "unit": unit, "functions": functions, "dropped": dict(dropped)}


def process_package(layout: RealCorpusLayout, package: str, runner) -> dict[str, Any]:
    """Process one captured package into `processed/<package>.jsonl.xz` (once); returns its counts."""
    from optserve.corpus.parallel import TaskFailure

    check_allowed(package)
    target = layout.processed(package)
    if target.exists():
        return json.loads(target.with_suffix(".summary.json").read_text())
    capture = CaptureLayout(layout.root)
    source_root = (capture.sources / package).resolve()  # captured paths are absolute: compare alike
    seen: dict[str, tuple[str, str, str, str]] = {}
    probes = 0
    for line in (capture.capture_dir(package) / "captured.jsonl").read_text().splitlines():
        record = json.loads(line)
        sha, source = record.get("sha256"), record.get("source", "")
        if not sha or sha in seen:
            continue
        if is_probe(source) or not source.startswith(str(source_root)):
            probes += 1
            continue
        file = Path(source).relative_to(source_root).as_posix().split("/", 1)[-1]  # drop "<pkg>-<version>/"
        seen[sha] = (str(capture.capture_dir(package) / "units" / f"{sha}.bc"), package, file, sha)
    lines, counts = [], Counter(probes=probes)
    for _task, result in runner.run(process_unit, list(seen.values())):
        if isinstance(result, TaskFailure) or result["status"] != "ok":
            counts["unit_errors"] += 1
            continue
        counts["units"] += 1
        counts["functions"] += len(result["functions"])
        counts.update({f"dropped_{k}": v for k, v in result["dropped"].items()})
        lines.append(json.dumps(result, sort_keys=True))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with lzma.open(partial, "wt") as out:
        out.write("\n".join(sorted(lines)) + ("\n" if lines else ""))
    summary = {"package": package, **counts}
    write_atomic(target.with_suffix(".summary.json"), json.dumps(summary, sort_keys=True))
    partial.replace(target)
    return summary


def _processed_records(layout: RealCorpusLayout, package: str):
    with lzma.open(layout.processed(package), "rt") as lines:
        for line in lines:
            yield json.loads(line)


def assemble(layout: RealCorpusLayout, packages: list[str]) -> dict[str, Any]:
    """Deduplicate, split by package and write both corpora; returns counts (also in build_stats.json)."""
    rank = {split: i for i, split in enumerate(("test", "val", "train"))}
    chosen: dict[str, dict[str, dict]] = {g: {} for g in GRANULARITIES}
    duplicates = Counter()
    for package in sorted(packages, key=lambda p: (rank[package_split(p)], p)):  # held-out packages first
        split = package_split(package)
        for record in _processed_records(layout, package):
            examples = {"units": [record["unit"]], "functions": record["functions"]}
            for granularity, items in examples.items():
                for example in items:
                    if example["id"] in chosen[granularity]:
                        duplicates[granularity] += 1  # kept where first seen: the most held-out split
                        continue
                    chosen[granularity][example["id"]] = {**example, "split": split}
    stats: dict[str, Any] = {
        "packages": {p: package_split(p) for p in sorted(packages)},
        "duplicates": duplicates,
    }
    for granularity in GRANULARITIES:
        corpus = layout.corpus(granularity)
        corpus.examples_dir.mkdir(parents=True, exist_ok=True)
        shards: dict[str, list[dict]] = defaultdict(list)
        for example in sorted(
            chosen[granularity].values(), key=lambda e: (e["package"], e["file"], e["function"])
        ):
            if example.get("ir") is not None:
                shards[f"{example['split']}-{example['package']}"].append(example)
        wanted = {}
        size = EXAMPLES_PER_SHARD[granularity]
        for prefix, examples in shards.items():  # one shard series per package: adding packages moves nothing
            for index in range(0, len(examples), size):
                wanted[f"{prefix}-{index // size:03d}.jsonl"] = examples[index : index + size]
        for path in corpus.examples_dir.glob("*.jsonl"):
            if path.name not in wanted:
                _drop_shard(corpus, path)
        for name, examples in sorted(wanted.items()):
            path = corpus.examples_dir / name
            text = "".join(json.dumps(e, sort_keys=True) + "\n" for e in examples)
            if not path.exists() or path.read_text() != text:
                _drop_shard(corpus, path)  # its labels belong to other examples now (the store keeps them)
                write_atomic(path, text)
        rows = ["id\tsplit\tsource\tfile\tfunction"]
        for examples in wanted.values():
            rows += [f"{e['id']}\t{e['split']}\t{e['source']}\t{e['package']}/{e['file']}\t{e['function']}"
                     for e in examples]  # fmt: skip
        write_atomic(corpus.manifest, "\n".join(rows) + "\n")
        kept = [e for examples in wanted.values() for e in examples]
        stats[granularity] = {
            "examples": {s: sum(e["split"] == s for e in kept) for s in SPLITS},
            "too_large": sum(1 for e in chosen[granularity].values() if e.get("ir") is None),
        }
        write_atomic(corpus.stats, json.dumps(stats, indent=1, sort_keys=True))
    return stats


def _drop_shard(corpus: CorpusLayout, shard: Path) -> None:
    shard.unlink(missing_ok=True)
    for stage_dir in corpus.labels_dir.glob("*"):
        for label_file in (stage_dir / shard.name, stage_dir / f"{shard.stem}.journal.jsonl"):
            label_file.unlink(missing_ok=True)


def build(
    root: Path, packages: list[str] | None = None, workers: int | None = None, store: Path | None = None
) -> dict[str, Any]:
    """Process every successfully captured package, then assemble both corpora.

    With a label `store`, the corpus' labels are exported to it first and restored after, so labels survive
    a rebuild that moves examples between shards.
    """
    from tqdm import tqdm

    from optserve.corpus.label_store import export, restore, stored_labels
    from optserve.corpus.parallel import ProcessRunner

    capture = CaptureLayout(root)
    layout = RealCorpusLayout(root)
    captured = [s.package for s in capture.statuses() if s.ok]
    packages = [p for p in (packages or captured) if p in captured]
    runner = ProcessRunner(workers)
    for package in tqdm(packages, desc="process packages", unit="pkg"):
        process_package(layout, package, runner)
    if store is not None:
        for granularity in GRANULARITIES:
            if layout.corpus(granularity).examples_dir.exists():
                export(layout.corpus(granularity), granularity, store)
    stats = assemble(layout, packages)
    if store is not None:
        for granularity in GRANULARITIES:
            objectives = tuple(sorted(stored_labels(store, granularity)))
            for objective in objectives:
                stats[granularity][f"restored_{objective}"] = restore(
                    layout.corpus(granularity), granularity, store, (objective,)
                )
    return stats


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--packages", nargs="*")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--store", type=Path, default=Path("data/labels/real"), help="committed label store")
    args = parser.parse_args(argv)
    stats = build(args.root.resolve(), args.packages, args.workers, args.store.resolve())
    print(json.dumps({g: stats[g] for g in GRANULARITIES}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
