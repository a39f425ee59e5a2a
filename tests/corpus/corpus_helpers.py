"""Helpers the corpus tests share (a module of its own: test files cannot import conftest reliably)."""

from __future__ import annotations

from pathlib import Path

from optserve.corpus.build import BuildConfig

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "corpus"
FIXTURE_SOURCES = ("gcc-torture", "gcc-dg", "llvm-transforms")


def fixture_build_config(data_dir: Path, out_dir: Path, **overrides) -> BuildConfig:
    settings = {
        "sources": FIXTURE_SOURCES,
        "val_percent": 20,
        "test_percent": 20,
        "workers": 2,
        "shard_size": 4,
    } | overrides
    return BuildConfig(data_dir=data_dir, out_dir=out_dir, **settings)
