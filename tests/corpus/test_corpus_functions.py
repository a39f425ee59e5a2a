"""From a source file to examples: normalization, the drop rules and deduplication."""

from __future__ import annotations

import json
from pathlib import Path

from optserve.compiler.ir import instruction_count, normalize_ir, parse_ir
from optserve.corpus.build import build_corpus
from optserve.corpus.compile import strip_test_comments
from optserve.corpus.functions import DropRules, examples_of_file, ir_hash
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.sources import SourceLayout, list_source_files
from tests.corpus.corpus_helpers import fixture_build_config


def _file(data_dir: Path, name: str):
    return next(f for f in list_source_files(SourceLayout(data_dir)) if f.path.endswith(name))


def test_examples_are_normalized_valid_per_function_modules(fixture_data_dir):
    record = examples_of_file((_file(fixture_data_dir, "bits.c"), DropRules(), 60.0))
    assert record["status"] == "ok"
    assert {e["function"] for e in record["examples"]} == {"popcount", "reverse_bits", "parity"}
    for example in record["examples"]:
        ir = example["ir"]
        assert parse_ir(ir, 1 << 20)  # valid IR
        assert normalize_ir(ir) == ir  # already normalized
        assert "attributes #" not in ir and "!llvm" not in ir and "; " not in ir
        assert example["instructions"] == instruction_count(ir)
        assert example["id"] == ir_hash(ir)
        assert example["bytes"] == len(ir.encode())
        assert ir.count("define ") == 1


def test_trivial_functions_are_dropped(fixture_data_dir):
    record = examples_of_file((_file(fixture_data_dir, "sum.c"), DropRules(min_instructions=4), 60.0))
    names = {e["function"] for e in record["examples"]}
    assert "nothing" not in names  # `void nothing(void) {}` is one instruction
    assert record["dropped"]["trivial"] == 1
    assert all(e["instructions"] >= 4 for e in record["examples"])


def test_over_long_functions_are_dropped(fixture_data_dir):
    source_file = _file(fixture_data_dir, "sorting.c")
    everything = examples_of_file((source_file, DropRules(max_bytes=1 << 20), 60.0))
    sizes = sorted(e["bytes"] for e in everything["examples"])
    limit = sizes[len(sizes) // 2]
    limited = examples_of_file((source_file, DropRules(max_bytes=limit), 60.0))
    assert all(e["bytes"] <= limit for e in limited["examples"])
    assert limited["dropped"]["too_long"] == sum(size > limit for size in sizes) > 0


def test_compile_errors_are_recorded_not_raised(fixture_data_dir):
    record = examples_of_file((_file(fixture_data_dir, "broken.c"), DropRules(), 60.0))
    assert record["status"] == "compile_error" and "error" in record["error"]
    assert record["examples"] == []


def test_unparseable_llvm_tests_are_skipped(fixture_data_dir):
    record = examples_of_file((_file(fixture_data_dir, "unparseable.ll"), DropRules(), 60.0))
    assert record["status"] == "parse_error"


def test_llvm_test_comments_are_stripped():
    text = "; RUN: opt %s\ndefine i32 @f(i32 %x) {\n; CHECK: ret\n  ret i32 %x\n}\n"
    assert strip_test_comments(text) == "define i32 @f(i32 %x) {\n  ret i32 %x\n}\n"


def test_normalization_makes_formatting_differences_duplicates():
    plain = "define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"
    noisy = (
        "; a comment\ndefine dso_local noundef i32 @f(i32 noundef %x) #0 {\n"
        "    %y   =   add i32 %x, 1   ; trailing\n  ret i32 %y\n}\nattributes #0 = { noinline nounwind }\n"
    )
    assert ir_hash(normalize_ir(plain)) == ir_hash(normalize_ir(noisy))


def test_duplicates_across_files_are_kept_once(fixture_data_dir, tmp_path):
    # strings.c and sum.c both define the same `clamp`; it is kept once, from the first file in order.
    config = fixture_build_config(fixture_data_dir, tmp_path / "corpus", sources=("gcc-torture",))
    stats = build_corpus(config, progress=False, log=lambda _: None)
    layout = CorpusLayout(tmp_path / "corpus")
    examples = [json.loads(line) for shard in layout.shards() for line in shard.read_text().splitlines()]
    clamps = [e for e in examples if e["function"] == "clamp"]
    assert len(clamps) == 1 and clamps[0]["file"].endswith("strings.c")
    ids = [e["id"] for e in examples]
    assert len(ids) == len(set(ids))
    assert stats["sources"]["gcc-torture"]["dropped_duplicate"] >= 1
    manifest_ids = [line.split("\t")[0] for line in layout.manifest.read_text().splitlines()[1:]]
    assert sorted(manifest_ids) == sorted(ids)
