"""Train/val/test split: by source file, deterministic, in the configured proportions."""

from __future__ import annotations

import json
from collections import defaultdict

from optserve.corpus.layout import CorpusLayout
from optserve.corpus.leakage import check_corpus
from optserve.corpus.split import split_of


def test_split_is_a_pure_function_of_the_file_key():
    keys = [f"gcc-dg:gcc/testsuite/gcc.dg/test-{i}.c" for i in range(200)]
    first = [split_of(k, 5, 5) for k in keys]
    assert first == [split_of(k, 5, 5) for k in keys]


def test_split_proportions_follow_the_percentages():
    keys = [f"csmith:csmith_{i:06d}.c" for i in range(20_000)]
    counts = defaultdict(int)
    for key in keys:
        counts[split_of(key, 10, 20)] += 1
    assert abs(counts["val"] / len(keys) - 0.10) < 0.01
    assert abs(counts["test"] / len(keys) - 0.20) < 0.01
    assert abs(counts["train"] / len(keys) - 0.70) < 0.015


def test_zero_percent_holds_nothing_out():
    assert {split_of(f"k{i}", 0, 0) for i in range(500)} == {"train"}


def test_every_function_of_a_file_lands_in_the_files_split(built_corpus):
    layout = CorpusLayout(built_corpus)
    splits_of_file = defaultdict(set)
    for shard in layout.shards():
        for line in shard.read_text().splitlines():
            example = json.loads(line)
            splits_of_file[(example["source"], example["file"])].add(example["split"])
            assert example["split"] == split_of(f"{example['source']}:{example['file']}", 20, 20)
            assert shard.name.startswith(example["split"] + "-")
    assert len(splits_of_file) >= 5
    assert all(len(splits) == 1 for splits in splits_of_file.values())
    assert len({s for splits in splits_of_file.values() for s in splits}) == 3  # fixtures reach every split


def test_manifest_self_check_is_clean(built_corpus):
    report = check_corpus(CorpusLayout(built_corpus))
    assert report.clean and report.examples > 10
