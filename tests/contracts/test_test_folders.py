"""`make test`'s runner (optserve/testing/folders.py): every test folder has its place in the longest-first
order, and folders run at once still report whole and name the ones that failed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from optserve.testing.folders import LONGEST_FIRST, ordered

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_folder_is_named_in_the_longest_first_order():
    folders = {path.name for path in TESTS.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert folders == set(LONGEST_FIRST)
    assert ordered(["tests/contracts/", "tests/new/", "tests/serve/"]) == [
        "tests/serve/",
        "tests/contracts/",
        "tests/new/",
    ]


def test_two_folders_at_once_print_whole_and_the_failed_one_is_named(tmp_path):
    for name, body in (("good", "assert True"), ("bad", "assert False, 'expected'")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"test_{name}.py").write_text(f"def test_{name}():\n    {body}\n")
    done = subprocess.run(
        [sys.executable, "-m", "optserve.testing.folders", "--jobs", "2", str(tmp_path / "good"),
         str(tmp_path / "bad")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"test folders that failed: {tmp_path / 'bad'}" in done.stdout
    assert "1 passed in" in done.stdout and "1 failed in" in done.stdout
    assert "AssertionError: expected" in done.stdout  # the failing folder's own output
