"""Every third-party package the code imports is declared in pyproject.toml: the package's own code in the
base install or the serve/train extras; tests, benchmarks, load tests and the helpers they share
(optserve/testing/, not installed) possibly in dev."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
TOOL_FOLDERS = ("tests", "benchmarks", "loadtests", "optserve/testing")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(*extras: str) -> set[str]:
    """Distribution names of the base requirements and of `extras` (the project's own name left out)."""
    project = PROJECT["project"]
    requirements = project["dependencies"] + [r for e in extras for r in project["optional-dependencies"][e]]
    names = {_canonical(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in requirements}
    return names - {_canonical(project["name"])}


def _imported(files: list[Path]) -> dict[str, Path]:
    """Top-level names of absolute imports (function-level ones too) -> a file importing each."""
    imported = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                # a script's import of a module beside it (run as a plain script where optserve is not
                # installed, e.g. passlm/pretrain.py on the lent machine) is local, not a distribution
                if not (path.parent / f"{top}.py").exists():
                    imported.setdefault(top, path)
    return imported


# Standard-library modules of other Python versions than the running one (sys.stdlib_module_names lists only
# its own): CPython's private SHA-256 module is _sha256 up to 3.11, _sha2 from 3.12 (clients/object_cache.py).
OTHER_VERSIONS_STDLIB = {"_sha2", "_sha256"}


def _undeclared(files: list[Path], declared: set[str], local: set[str]) -> list[str]:
    providers = importlib.metadata.packages_distributions()
    missing = []
    stdlib = set(sys.stdlib_module_names) | OTHER_VERSIONS_STDLIB
    for name, path in sorted(_imported(files).items()):
        if name in stdlib or name in local or name in ("optserve", "__future__"):
            continue
        distributions = {_canonical(d) for d in providers.get(name, [name])}
        if not distributions & declared:
            missing.append(f"{name} ({sorted(distributions)}), imported by {path.relative_to(REPO_ROOT)}")
    return missing


def test_the_package_declares_what_it_imports():
    folders = set(PROJECT["tool"]["setuptools"]["package-dir"].values())
    files = [p for folder in folders for p in (REPO_ROOT / folder).rglob("*.py")]
    helpers = REPO_ROOT / "optserve" / "testing"  # a tool folder inside the package's folder
    files = [p for p in files if not p.is_relative_to(helpers)]
    assert _undeclared(files, _declared("serve", "train"), local=set()) == []


def test_tests_benchmarks_and_load_tests_declare_what_they_import():
    files = [p for folder in TOOL_FOLDERS for p in (REPO_ROOT / folder).rglob("*.py")]
    local = {p.stem for p in files} | set(TOOL_FOLDERS)  # helper modules imported by bare name
    assert _undeclared(files, _declared("serve", "train", "dev"), local) == []
