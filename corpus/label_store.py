"""Labels that persist across sessions: committed, compressed, keyed by example id, with a manifest.

A corpus is rebuilt from its sources by scripts (IR is never committed), but labels cost compile time, so
they are kept in the repository under `data/labels/<corpus name>/`:

    <granularity>-<objective>-<split>.jsonl.xz   one record per labelled example: key (normalized-IR hash),
                                                  package, file, function, and the label (costs, best list,
                                                  top-k lists, seed costs, compiles, search version, LLVM)
    MANIFEST.json                                 per file: records, bytes, sha256; budgets and versions
    seeds/<fingerprint>.json                      the seed lists labels started from (`seed_costs` order)

`export` merges the labels of a corpus directory (finished shards and in-progress journals of stage
`local`, with the coreset costs of stage `measure` folded in as `measured`) into the store; `restore`
writes stored labels back into a (rebuilt) corpus as journal records, so `optserve dataset label --stage
local` skips them and continues where earlier sessions stopped. Records are matched by example id, so shard
numbering may change between rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from optserve.corpus.journal import Journal, read_jsonl, write_atomic
from optserve.corpus.label import OBJECTIVES, fold_measurements, read_labels
from optserve.corpus.layout import CorpusLayout

STAGE = "local"
MANIFEST = "MANIFEST.json"


def store_file(store: Path, granularity: str, objective: str, split: str) -> Path:
    return store / f"{granularity}-{objective}-{split}.jsonl.xz"


def read_store_file(path: Path) -> Iterator[dict[str, Any]]:
    if path.exists():
        with lzma.open(path, "rt") as lines:
            for line in lines:
                yield json.loads(line)


def stored_labels(store: Path, granularity: str) -> dict[str, dict[str, dict]]:
    """{objective: {example id: record}} of one granularity."""
    labels: dict[str, dict[str, dict]] = defaultdict(dict)
    for path in sorted(store.glob(f"{granularity}-*.jsonl.xz")):
        objective = path.name[len(granularity) + 1 :].rsplit("-", 1)[0]
        for record in read_store_file(path):
            labels[objective][record["key"]] = record
    return labels


def export(layout: CorpusLayout, granularity: str, store: Path) -> dict[str, int]:
    """Merge the corpus' stage-`local` labels into the store (new labels replace older ones of an example)."""
    examples = {e["id"]: e for shard in layout.shards() for e in read_jsonl(shard)}
    fresh = fold_measurements(read_labels(layout, STAGE), read_labels(layout, "measure"))
    merged = stored_labels(store, granularity)
    added: Counter[str] = Counter()
    for key, record in fresh.items():
        example = examples.get(key)
        if example is None or "error" in record:
            continue
        for objective in OBJECTIVES:
            if objective not in record:
                continue
            added[objective] += key not in merged[objective]
            merged[objective][key] = {
                "key": key,
                "split": example["split"],
                "package": example["package"],
                "file": example["file"],
                "function": example["function"],
                "instructions": example["instructions"],
                **record[objective],
            }
    for objective, records in merged.items():
        by_split: dict[str, list[dict]] = defaultdict(list)
        for record in records.values():
            by_split[record["split"]].append(record)
        for split, rows in by_split.items():
            rows.sort(key=lambda r: r["key"])
            text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
            path = store_file(store, granularity, objective, split)
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            with lzma.open(partial, "wt", preset=9) as out:
                out.write(text)
            partial.replace(path)
    for seeds_file in sorted((layout.labels_dir / STAGE / "seeds").glob("*.json")):
        write_seed_set(store / "seeds", seeds_file.stem, json.loads(seeds_file.read_text()))
    write_manifest(store)
    return dict(added)


def restore(layout: CorpusLayout, granularity: str, store: Path, objectives: tuple[str, ...]) -> int:
    """Write stored labels into the corpus' journals (for examples not labelled there); returns how many."""
    stored = stored_labels(store, granularity)
    present = read_labels(layout, STAGE)
    restored = 0
    for shard in layout.shards():
        if layout.label_path(STAGE, shard).exists():
            continue
        with Journal(layout.label_journal(STAGE, shard)) as journal:
            for example in read_jsonl(shard):
                key = example["id"]
                have = present.get(key, {})
                missing = [o for o in objectives if key in stored[o] and o not in have]
                if not missing or not all(key in stored[o] or o in have for o in objectives):
                    continue
                # A journal's later record of a key replaces its earlier one: carry what is there over.
                record = {"key": key, "split": example["split"], "source": example["source"], **have}
                for objective in missing:
                    label = dict(stored[objective][key])
                    for field in ("key", "split", "package", "file", "function", "instructions"):
                        label.pop(field, None)
                    record[objective] = label
                journal.append(record)
                restored += 1
    return restored


def write_seed_set(directory: Path, fingerprint: str, lists) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / f"{fingerprint}.json", json.dumps([list(p) for p in lists]) + "\n")


def seed_sets(store: Path) -> dict[str, list[list[str]]]:
    """Every seed set the stored labels started from, by fingerprint (their `seed_costs` follow its order)."""
    return {path.stem: json.loads(path.read_text()) for path in sorted((store / "seeds").glob("*.json"))}


def write_manifest(store: Path) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for path in sorted(store.glob("*.jsonl.xz")):
        records = list(read_store_file(path))
        saved = sum(r["oz"] - r["best"] for r in records)
        files[path.name] = {
            "records": len(records),
            "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "packages": len({r["package"] for r in records}),
            "budgets": dict(sorted(Counter(str(r["budget"]) for r in records).items())),
            "searches": sorted({r["search"] for r in records}),
            "llvm": sorted({r["llvm"] for r in records}),
            "oz_total": sum(r["oz"] for r in records),
            "best_total": sum(r["best"] for r in records),
            "saved_vs_oz": round(saved / max(1, sum(r["oz"] for r in records)), 5),
        }
    manifest = {"files": files}
    write_atomic(store / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    """`python -m optserve.corpus.label_store export|restore`: for both corpora of a real-code root."""
    import argparse

    from optserve.corpus.real_corpus import GRANULARITIES, RealCorpusLayout

    parser = argparse.ArgumentParser(description="Merge labels into the committed store, or restore them.")
    parser.add_argument("action", choices=("export", "restore"))
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--store", type=Path, default=Path("data/labels/real"))
    args = parser.parse_args(argv)
    layout = RealCorpusLayout(args.root)
    for granularity in GRANULARITIES:
        corpus = layout.corpus(granularity)
        if not corpus.examples_dir.exists():
            continue
        if args.action == "export":
            print(granularity, "new labels:", export(corpus, granularity, args.store))
        else:
            for objective in sorted(stored_labels(args.store, granularity)):
                print(
                    granularity,
                    objective,
                    "restored:",
                    restore(corpus, granularity, args.store, (objective,)),
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
