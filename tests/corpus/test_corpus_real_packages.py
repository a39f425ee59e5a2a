"""The real-package corpus refuses evaluation code and knows every package it lists."""

from __future__ import annotations

import pytest

from optserve.corpus.real_packages import EXCLUDED, PACKAGES, ExcludedPackage, check_allowed


@pytest.mark.parametrize("package", ["zlib", "lua5.4", "lua5.1", "libjpeg-turbo", "libjpeg9", "lame", "tiff"])
def test_evaluation_packages_are_refused(package):
    with pytest.raises(ExcludedPackage):
        check_allowed(package)


def test_listed_packages_are_allowed_and_cover_the_kinds():
    assert not [p for p in PACKAGES if EXCLUDED.match(p)]
    kinds = set(PACKAGES.values())
    assert {
        "compression",
        "parser",
        "crypto",
        "network",
        "database",
        "codec",
        "interpreter",
        "tool",
        "math",
    } <= kinds
    assert len(PACKAGES) >= 40
