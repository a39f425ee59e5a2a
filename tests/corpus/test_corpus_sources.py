"""Source listing and provenance, csmith generation, and the deb-src line built from apt's own sources."""

from __future__ import annotations

import shutil

import pytest

from optserve.corpus.functions import DropRules, examples_of_file
from optserve.corpus.sources import (
    LICENCES,
    SourceLayout,
    debian_archive_line,
    generate_csmith,
    list_source_files,
)


def test_source_files_carry_provenance_in_a_stable_order(fixture_data_dir):
    files = list(list_source_files(SourceLayout(fixture_data_dir), ("gcc-torture", "llvm-transforms")))
    assert [f.path for f in files] == sorted(f.path for f in files if f.source == "gcc-torture") + sorted(
        f.path for f in files if f.source == "llvm-transforms"
    )
    torture = files[0]
    assert torture.path.startswith("gcc/testsuite/gcc.c-torture/") and torture.language == "c"
    assert torture.package == "fixture 1 (optserve test files)"  # from sources/gcc-12/PACKAGE_VERSION
    assert torture.licence == LICENCES["gcc"]
    llvm = files[-1]
    assert llvm.path.startswith("llvm/test/Transforms/") and llvm.language == "llvm-ir"
    assert llvm.licence == LICENCES["llvm-transforms"]


def test_unknown_source_is_refused(fixture_data_dir):
    with pytest.raises(Exception, match="unknown source"):
        list(list_source_files(SourceLayout(fixture_data_dir), ("nope",)))


def test_deb_src_line_comes_from_the_configured_archive(monkeypatch):
    monkeypatch.setenv("OPTSERVE_DEBIAN_MIRROR", "http://mirror.invalid/debian/")
    line = debian_archive_line()
    assert line.startswith("deb-src http://mirror.invalid/debian ") and line.endswith(" main")
    if shutil.which("apt-get"):
        monkeypatch.delenv("OPTSERVE_DEBIAN_MIRROR")
        words = debian_archive_line().split()
        assert words[0] == "deb-src" and "://" in words[1] and words[3] == "main"


@pytest.mark.skipif(shutil.which("csmith") is None, reason="csmith not installed (apt-get install csmith)")
def test_csmith_programs_are_reproducible_and_compile(tmp_path):
    first = SourceLayout(tmp_path / "a")
    second = SourceLayout(tmp_path / "b")
    generate_csmith(first, 2)
    generate_csmith(second, 2)
    programs = sorted(first.csmith_root.glob("csmith_*.c"))
    assert [p.name for p in programs] == ["csmith_000001.c", "csmith_000002.c"]
    assert all(p.read_text() == (second.csmith_root / p.name).read_text() for p in programs)
    source_file = next(iter(list_source_files(first, ("csmith",))))
    record = examples_of_file((source_file, DropRules(), 60.0))
    assert record["status"] == "ok" and record["examples"]
    assert source_file.package.startswith("csmith ")
