"""Shared fixtures for the corpus tests: the tiny fixture sources, and a corpus built from them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optserve.corpus.build import build_corpus
from tests.corpus.corpus_helpers import FIXTURES, fixture_build_config


@pytest.fixture
def fixture_data_dir(tmp_path: Path) -> Path:
    """A private copy of tests/data/corpus (laid out like data/: sources/gcc-12, sources/llvm-19)."""
    target = tmp_path / "data"
    shutil.copytree(FIXTURES, target)
    return target


@pytest.fixture(scope="session")
def _built_fixture_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("corpus")
    shutil.copytree(FIXTURES, base / "data")
    build_corpus(fixture_build_config(base / "data", base / "corpus"), progress=False, log=lambda _: None)
    return base / "corpus"


@pytest.fixture
def built_corpus(_built_fixture_corpus: Path, tmp_path: Path) -> Path:
    """A fresh copy of the unlabelled corpus built from the fixtures (built once per session)."""
    target = tmp_path / "corpus"
    shutil.copytree(_built_fixture_corpus, target)
    return target
