"""The build resumes from its per-file journal, and can write a snapshot of what is compiled so far."""

from __future__ import annotations

import json

from optserve.corpus.build import build_corpus
from optserve.corpus.layout import CorpusLayout
from tests.corpus.corpus_helpers import fixture_build_config


def _quiet(config, **kwargs):
    return build_corpus(config, progress=False, log=lambda _: None, **kwargs)


def test_a_resumed_build_compiles_only_the_files_not_done(fixture_data_dir, tmp_path):
    out = tmp_path / "corpus"
    first = _quiet(fixture_build_config(fixture_data_dir, out, limit_per_source=2))
    assert first["timing"]["files_compiled_this_run"] == 6
    full = _quiet(fixture_build_config(fixture_data_dir, out))
    assert full["timing"]["files_compiled_this_run"] == 11 - 6
    fresh = _quiet(fixture_build_config(fixture_data_dir, tmp_path / "fresh"))
    assert (out / "manifest.tsv").read_text() == (tmp_path / "fresh" / "manifest.tsv").read_text()
    assert full["splits"] == fresh["splits"] and full["complete"]


def test_snapshot_writes_what_is_compiled_and_compiles_nothing(fixture_data_dir, tmp_path):
    out = tmp_path / "corpus"
    partial = _quiet(fixture_build_config(fixture_data_dir, out, limit_per_source=2))
    snapshot = _quiet(fixture_build_config(fixture_data_dir, out), compile_more=False)
    assert snapshot["timing"]["files_compiled_this_run"] == 0 and not snapshot["complete"]
    assert snapshot["total"] == partial["total"]
    stats = json.loads(CorpusLayout(out).stats.read_text())
    assert sum(c["files"] for c in stats["sources"].values()) == 6
