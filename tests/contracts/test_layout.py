"""README's layout table is the tree: one row per top-level folder, and its runtime/training column is what
the import contract `runtime-not-training` enforces."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def _layout_rows() -> dict[str, str]:
    """folder -> wing, from the table under README's `## Layout`."""
    section = (REPO_ROOT / "README.md").read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`/]+)/` \| ([^|]+?) \|", section, flags=re.MULTILINE)
    assert rows, "README has no layout table under ## Layout"
    return {folder: wing for folder, wing in rows}


def _tracked_folders() -> set[str]:
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(".")}


def _contract(contract_id: str) -> dict:
    contracts = PROJECT["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def test_the_layout_table_lists_every_top_level_folder_and_no_other():
    assert set(_layout_rows()) == _tracked_folders()


def test_the_layout_tables_wings_are_the_import_contracts_wings():
    package_of = {folder: package for package, folder in PROJECT["tool"]["setuptools"]["package-dir"].items()}
    contract = _contract("runtime-not-training")
    runtime, training = set(contract["source_modules"]), set(contract["forbidden_modules"])
    for folder, wing in _layout_rows().items():
        package = package_of.get(folder)
        if package is None or package in ("optserve", "optserve.models"):  # no code, or the glue (below)
            continue
        if wing.startswith("runtime"):
            assert package in runtime, f"{folder}/ is runtime in README but not a source of the contract"
        else:
            assert wing == "training", f"{folder}/ holds code of wing {wing!r}: runtime or training?"
            assert package in training, f"{folder}/ is training in README but the runtime may import it"
    assert {"optserve.config", "optserve.strategies", "optserve.v1"} <= runtime
