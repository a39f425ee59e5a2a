"""The Dockerfile's dependency layer installs the project from pyproject.toml alone, before the code is
copied: it must create every package folder the project lists, or setuptools stops ("package directory
... does not exist"; it did once, when passlm/evaluation/ was split out)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _package_folders() -> dict[str, str]:
    """package -> its folder, as setuptools resolves `packages` through `package-dir`."""
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dir = setuptools["package-dir"]
    folders = {}
    for package in setuptools["packages"]:
        parts = package.split(".")
        for cut in range(len(parts), 0, -1):  # the longest mapped prefix
            prefix = ".".join(parts[:cut])
            if prefix in package_dir:
                folders[package] = "/".join([package_dir[prefix], *parts[cut:]])
                break
    return folders


def _layer_commands() -> str:
    """The shell commands of the layer's RUN before its `pip install`."""
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    run = re.search(r"^RUN (mkdir -p optserve/v1 .*?)&& pip install -e", dockerfile, flags=re.M | re.S)
    assert run, "the Dockerfile has no dependency layer starting with `RUN mkdir -p optserve/v1`"
    return run.group(1)


def test_the_dependency_layer_creates_every_package_folder(tmp_path):
    subprocess.run(["bash", "-c", _layer_commands()], cwd=tmp_path, check=True)
    folders = _package_folders()
    assert set(folders) == set(
        tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    missing = sorted(folder for folder in folders.values() if not (tmp_path / folder).is_dir())
    assert not missing, f"the Dockerfile's dependency layer does not create {missing}"
