"""Assertions the engine tests share (a module of its own: test files cannot import conftest reliably)."""

from __future__ import annotations

import pytest


def assert_same_candidates(left, right) -> None:
    """Two generations of one request by two engine paths: same pass lists, same scores."""
    assert [c.pass_list for c in left.candidates] == [c.pass_list for c in right.candidates]
    for a, b in zip(left.candidates, right.candidates, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)
        assert a.priority == pytest.approx(b.priority, abs=1e-4)
