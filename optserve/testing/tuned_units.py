"""What the benchmarks over a tuned store's units share (benchmarks/tuned_compile.py, tuned_lookup.py): their
options, a unit's bitcode as optcc sends it, and a git revision's module loaded beside the working tree's,
so that one process times the code before a change against the code after it on the same units."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

from optserve.config import REPO_ROOT

OBJECTIVE = "text_size"  # what the units were tuned for (optcc's size builds)


def unit_arguments(description: str, runs: int) -> argparse.ArgumentParser:
    """The options of the benchmarks over a tuned store's units: the store, the tree of sources with their
    flags and compiler, the revision run as 'before', alternating runs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--store", required=True)
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--flags", default="-Oz")
    parser.add_argument("--compiler", default="clang-19")
    parser.add_argument("--glob", default="*.c")
    parser.add_argument("--before", default="HEAD", help="the git revision run as 'before'")
    parser.add_argument("--runs", type=int, default=runs)
    return parser


def bitcode_of(compiler: str, tree: Path, source: Path, flags: list[str], out: Path) -> bytes:
    """`source`'s bitcode as optcc sends it: `flags`, then clang's front end alone (no LLVM passes)."""
    command = [compiler, *flags, "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-w"]
    subprocess.run([*command, source.name, "-o", str(out)], cwd=tree, check=True)
    return out.read_bytes()


def revision_module(revision: str, path: str, name: str, imports: dict[str, str]):
    """The module at `path` of git `revision`, loaded as `name`; its imports are the working tree's, but for
    the modules `imports` names (module -> the name a revision's module was loaded as)."""
    source = subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout
    for module, loaded in imports.items():
        source = source.replace(f"from {module} import", f"from {loaded} import")
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    exec(compile(source, f"{revision}:{path}", "exec"), module.__dict__)  # noqa: S102 (our own history)
    return module
