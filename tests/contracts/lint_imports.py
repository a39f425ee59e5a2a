"""Check the import contracts of pyproject.toml (`[tool.importlinter]`) with import-linter.

    python tests/contracts/lint_imports.py          # what `make test` runs before pytest

import-linter reads a package from one folder, but optserve's subpackages live in the repository's top-level
folders (`[tool.setuptools] package-dir`). This stages the package as an install lays it out (the folders'
Python files under one `optserve/`) in a temporary folder and runs `lint-imports` there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = REPO_ROOT / "pyproject.toml"


def _all_but_python(folder: str, names: list[str]) -> list[str]:
    """What the staged copy leaves out: caches and every file but Python sources (models, data)."""
    return [n for n in names if n == "__pycache__" or not (n.endswith(".py") or Path(folder, n).is_dir())]


def stage_package(dest: Path, repo_root: Path = REPO_ROOT) -> Path:
    """Copy the package's Python files into `dest` laid out as installed (`dest/optserve/serve/...`)."""
    config = tomllib.loads((repo_root / "pyproject.toml").read_text())
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(package_dir.items()):
        target = dest.joinpath(*package.split("."))
        shutil.copytree(repo_root / folder, target, ignore=_all_but_python, dirs_exist_ok=True)
    return dest


def lint_staged(staged: Path, config: Path = PYPROJECT) -> subprocess.CompletedProcess:
    """Run `lint-imports` on a staged package; the result's returncode is 0 when every contract is kept."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo", str(config)],
        cwd=staged,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(staged)},
        capture_output=True,
        text=True,
    )


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="optserve-imports-") as tmp:
        result = lint_staged(stage_package(Path(tmp)))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
