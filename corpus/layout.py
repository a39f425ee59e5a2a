"""The on-disk layout of a built corpus (documented in docs/bench/corpus.md).

<root>/examples/<split>-NNNNN.jsonl      examples, one JSON object a line (id, provenance, ir, ...)
<root>/functions/<source>/<split>/<id16>.ll   the same normalized per-function modules as files
<root>/manifest.tsv                      id (SHA-256 of normalized IR), split, source, file, function
<root>/build_stats.json                  counts per source and split, drop reasons, yields, timings
<root>/DATASET_CARD.md                   generated card
<root>/labels/<stage>/<shard>.jsonl      labels per examples shard (stage: autotune, broadcast)
<root>/labels/<stage>/<shard>.journal.jsonl   in-progress labels (resume state)
<root>/.build/files.jsonl                per-source-file build journal (resume state)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optserve.corpus.split import SPLITS


@dataclass(frozen=True)
class CorpusLayout:
    root: Path

    @property
    def examples_dir(self) -> Path:
        return self.root / "examples"

    @property
    def functions_dir(self) -> Path:
        return self.root / "functions"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.tsv"

    @property
    def stats(self) -> Path:
        return self.root / "build_stats.json"

    @property
    def card(self) -> Path:
        return self.root / "DATASET_CARD.md"

    @property
    def build_journal(self) -> Path:
        return self.root / ".build" / "files.jsonl"

    @property
    def labels_dir(self) -> Path:
        return self.root / "labels"

    def shard_path(self, split: str, index: int) -> Path:
        return self.examples_dir / f"{split}-{index:05d}.jsonl"

    def shards(self, splits: tuple[str, ...] = SPLITS) -> list[Path]:
        """Example shards of the given splits, in split then index order."""
        return [p for split in splits for p in sorted(self.examples_dir.glob(f"{split}-*.jsonl"))]

    def function_file(self, source: str, split: str, example_id: str) -> Path:
        return self.functions_dir / source / split / f"{example_id[:16]}.ll"

    def label_path(self, stage: str, shard: Path) -> Path:
        return self.labels_dir / stage / shard.name

    def label_journal(self, stage: str, shard: Path) -> Path:
        return self.labels_dir / stage / f"{shard.stem}.journal.jsonl"
