"""Build the unlabelled corpus: sources -> per-file examples (journaled, parallel) -> split, dedup, shards.

Resumable: each finished source file is journaled; a killed build restarted with the same output directory
compiles only the files not yet done. The final step (split, global dedup, shards, manifest, .ll files,
stats) is cheap and always recomputed from the journal, so it is deterministic whatever order workers
finished in.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optserve.corpus import sources as src
from optserve.corpus.compile import CLANG_FLAGS, GCC_COMPAT_FLAGS
from optserve.corpus.functions import DropRules, examples_of_file, source_key
from optserve.corpus.journal import Journal, write_atomic, write_jsonl_atomic
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.parallel import ProcessRunner, TaskFailure
from optserve.corpus.split import SPLITS, split_of


@dataclass(frozen=True)
class BuildConfig:
    data_dir: Path  # downloads/ and sources/ live here
    out_dir: Path  # the corpus (CorpusLayout)
    sources: tuple[str, ...] = src.SOURCE_NAMES
    rules: DropRules = field(default_factory=DropRules)
    val_percent: int = 5
    test_percent: int = 5
    compile_timeout_s: float = 60.0
    csmith_programs: int = 2000
    shard_size: int = 1000
    workers: int = 2
    limit_per_source: int | None = None  # first N files of each source (quick runs)
    write_function_files: bool = True
    debian_mirror: str | None = None


def prepare_sources(config: BuildConfig, log: Callable[[str], None] = print) -> None:
    """Fetch, extract or generate whatever the chosen sources need and is not there yet."""
    layout = src.SourceLayout(config.data_dir)
    wants_gcc = any(name in src.GCC_TESTSUITE_DIRS for name in config.sources)
    if wants_gcc and not layout.version_file(layout.gcc_root).exists():
        log("fetching and extracting the GCC 12 testsuite")
        src.extract_gcc(layout, src.fetch_gcc(layout))
    if "llvm-transforms" in config.sources and not layout.version_file(layout.llvm_root).exists():
        log("fetching and extracting LLVM 19 test/Transforms")
        src.extract_llvm(layout, src.fetch_llvm(layout, config.debian_mirror))
    if "csmith" in config.sources and config.csmith_programs > 0:
        log(f"generating csmith programs (seeds 1..{config.csmith_programs})")
        src.generate_csmith(layout, config.csmith_programs, config.workers)


def _chosen_files(config: BuildConfig) -> list[src.SourceFile]:
    layout = src.SourceLayout(config.data_dir)
    files: list[src.SourceFile] = []
    for name in config.sources:
        of_source = list(src.list_source_files(layout, (name,)))
        if name == "csmith":  # only the configured seeds, even if more programs were generated earlier
            of_source = of_source[: config.csmith_programs]
        files.extend(of_source[: config.limit_per_source])
    return files


def _schedule(files: list[src.SourceFile]) -> list[src.SourceFile]:
    """Compile order: each source advances at the same fraction, in a hashed order within it, so a build
    stopped half-way (or a snapshot) holds an even sample of every source. The corpus itself never depends
    on this order (finalize works in file order)."""
    by_source: dict[str, list[src.SourceFile]] = defaultdict(list)
    for f in files:
        by_source[f.source].append(f)
    ranked = []
    for members in by_source.values():
        members.sort(key=lambda f: hashlib.sha256(source_key(f.source, f.path).encode()).digest())
        ranked += [((i + 0.5) / len(members), f.source, f) for i, f in enumerate(members)]
    return [f for _, _, f in sorted(ranked, key=lambda r: (r[0], r[1]))]


def build_corpus(
    config: BuildConfig, progress: bool = True, log: Callable[[str], None] = print, compile_more: bool = True
) -> dict[str, Any]:
    """Build (or resume building) the corpus; returns the build stats also written to build_stats.json.

    `compile_more=False` writes a snapshot of the files compiled so far (while a build may still be running:
    the journal is only read) and compiles nothing.
    """
    started, started_at = time.monotonic(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    prepare_sources(config, log)
    layout = CorpusLayout(config.out_dir)
    files = _chosen_files(config)
    if not files:
        raise src.SourceError(f"no source files for {', '.join(config.sources)} under {config.data_dir}")

    journal = Journal(layout.build_journal)
    done = journal.records(repair=compile_more)
    if not compile_more:
        files = [f for f in files if source_key(f.source, f.path) in done]
    todo = _schedule([f for f in files if source_key(f.source, f.path) not in done])
    log(f"{len(files)} source files, {len(files) - len(todo)} already done, {len(todo)} to compile")
    jobs = [(f, config.rules, config.compile_timeout_s) for f in todo]
    runner = ProcessRunner(config.workers)
    with journal, tqdm(total=len(jobs), unit="file", disable=not progress, smoothing=0.05) as bar:
        for (source_file, _, _), record in runner.run(examples_of_file, jobs):
            if isinstance(record, TaskFailure):
                key = source_key(source_file.source, source_file.path)
                record = {"key": key, "status": record.kind, "error": record.message, "functions": 0,
                          "dropped": {}, "examples": []}  # fmt: skip
            journal.append(record)
            done[record["key"]] = record
            bar.update()
    compile_seconds = time.monotonic() - started
    stats = finalize(config, layout, files, done)
    stats["complete"] = compile_more  # a snapshot leaves out the files not compiled yet
    runs = Journal(layout.root / ".build" / "runs.jsonl", key="started")
    with runs:
        if todo:
            runs.append(
                {
                    "started": started_at,
                    "files": len(todo),
                    "compile_s": round(compile_seconds, 1),
                    "workers": config.workers,
                }
            )
    stats["timing"] = {
        "this_run_s": round(time.monotonic() - started, 1),
        "compile_s": round(compile_seconds, 1),
        "files_compiled_this_run": len(todo),
        "runs": list(runs.records().values()),
    }
    write_atomic(layout.stats, json.dumps(stats, indent=2) + "\n")
    return stats


def finalize(
    config: BuildConfig, layout: CorpusLayout, files: list[src.SourceFile], done: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Split by file, deduplicate across the whole corpus (first occurrence in file order wins), write out."""
    per_source: dict[str, Counter[str]] = defaultdict(Counter)
    kept: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}
    seen: set[str] = set()
    for source_file in files:
        record = done[source_key(source_file.source, source_file.path)]
        counts = per_source[source_file.source]
        split = split_of(record["key"], config.val_percent, config.test_percent)
        counts["files"] += 1
        counts[f"files_{record['status']}"] += 1
        counts["functions"] += record["functions"]
        if "seconds" in record:
            counts["worker_seconds"] += record["seconds"]
            counts["files_timed"] += 1
        for reason, n in record["dropped"].items():
            counts[f"dropped_{reason}"] += n
        for example in record["examples"]:
            if example["id"] in seen:
                counts["dropped_duplicate"] += 1
                continue
            seen.add(example["id"])
            counts[f"kept_{split}"] += 1
            kept[split].append({**example, "split": split})

    for examples in kept.values():  # id order is a fixed shuffle: any prefix of shards mixes all sources
        examples.sort(key=lambda e: e["id"])
    _write_examples(config, layout, kept)
    return {
        "sources": {name: dict(sorted(c.items())) for name, c in per_source.items()},
        "splits": {split: len(examples) for split, examples in kept.items()},
        "total": sum(len(examples) for examples in kept.values()),
        "packages": sorted({f.package for f in files}),
        "settings": {
            "min_instructions": config.rules.min_instructions,
            "max_bytes": config.rules.max_bytes,
            "val_percent": config.val_percent,
            "test_percent": config.test_percent,
            "csmith_programs": config.csmith_programs if "csmith" in config.sources else 0,
            "csmith_flags": list(src.CSMITH_FLAGS),
            "clang_flags": list(CLANG_FLAGS),
            "gcc_compat_flags": list(GCC_COMPAT_FLAGS),
            "limit_per_source": config.limit_per_source,
        },
    }


def _write_examples(config: BuildConfig, layout: CorpusLayout, kept: dict[str, list[dict[str, Any]]]) -> None:
    layout.examples_dir.mkdir(parents=True, exist_ok=True)
    written: set[Path] = set()
    manifest = ["id\tsplit\tsource\tfile\tfunction\n"]
    for split, examples in kept.items():
        for index in range(0, len(examples), config.shard_size):
            path = layout.shard_path(split, index // config.shard_size)
            write_jsonl_atomic(path, examples[index : index + config.shard_size])
            written.add(path)
        manifest += [f"{e['id']}\t{split}\t{e['source']}\t{e['file']}\t{e['function']}\n" for e in examples]
    for stale in set(layout.examples_dir.glob("*.jsonl")) - written:
        stale.unlink()
    write_atomic(layout.manifest, "".join(manifest))
    if config.write_function_files:  # files are content-addressed: write the new ones, then drop the stale
        wanted: set[Path] = set()
        for split, examples in kept.items():
            for example in examples:
                path = layout.function_file(example["source"], split, example["id"])
                wanted.add(path)
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(path, example["ir"])
        for stale in set(layout.functions_dir.rglob("*.ll")) - wanted:
            stale.unlink()
