"""Leakage checks on the normalized-IR hash manifest: evaluation functions must never appear in training.

`check_corpus` checks the corpus against itself (an id or a source file in two splits); `check_against`
hashes outside IR files (an evaluation set, a benchmark's functions) the way the corpus does and reports
which of them are in the training split.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from optserve.corpus.functions import ir_hash
from optserve.corpus.layout import CorpusLayout


@dataclass
class LeakageReport:
    examples: int = 0
    ids_in_several_splits: list[str] = field(default_factory=list)
    files_in_several_splits: list[str] = field(default_factory=list)
    checked_files: int = 0
    unreadable_files: list[str] = field(default_factory=list)
    found_in_split: list[str] = field(
        default_factory=list
    )  # outside IR files holding an example of the split

    @property
    def clean(self) -> bool:
        return not (self.ids_in_several_splits or self.files_in_several_splits or self.found_in_split)


def read_manifest(layout: CorpusLayout) -> list[dict[str, str]]:
    with open(layout.manifest, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def check_corpus(layout: CorpusLayout) -> LeakageReport:
    rows = read_manifest(layout)
    splits_of_id: dict[str, set[str]] = defaultdict(set)
    splits_of_file: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        splits_of_id[row["id"]].add(row["split"])
        splits_of_file[f"{row['source']}:{row['file']}"].add(row["split"])
    return LeakageReport(
        examples=len(rows),
        ids_in_several_splits=sorted(k for k, v in splits_of_id.items() if len(v) > 1),
        files_in_several_splits=sorted(k for k, v in splits_of_file.items() if len(v) > 1),
    )


def _ir_files(paths: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.ll")) if path.is_dir() else [path])
    return files


def hashes_of_ir(text: str) -> set[str]:
    """The corpus ids an IR file would have: the whole module, and each of its functions split out."""
    from optserve.compiler.ir import normalize_ir, split_functions

    hashes = {ir_hash(normalize_ir(text))}
    hashes.update(ir_hash(normalize_ir(function_ir)) for _, function_ir in split_functions(text))
    return hashes


def check_against(layout: CorpusLayout, paths: Iterable[Path], split: str = "train") -> LeakageReport:
    """The corpus self-check plus: which IR files under `paths` are (or contain) a `split` example."""
    from optserve.compiler.ir import IRError

    report = check_corpus(layout)
    protected = {row["id"] for row in read_manifest(layout) if row["split"] == split}
    for path in _ir_files(paths):
        report.checked_files += 1
        try:
            hashes = hashes_of_ir(path.read_text())
        except (IRError, OSError, UnicodeDecodeError):
            report.unreadable_files.append(str(path))
            continue
        if hashes & protected:
            report.found_in_split.append(str(path))
    return report
