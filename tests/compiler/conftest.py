"""Shared fixtures: real IR compiled by clang-19 from tests/data/c at test time, and IR fixtures."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"
C_PROGRAMS = sorted((DATA / "c").glob("*.c"))
IR_FIXTURES = DATA / "ir"
CLANG = "clang-19"
CLANG_FOR_TUNING = ["-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-w"]


def compile_c(source: Path | str, *extra: str, text: bool = True) -> str | bytes:
    """IR (text, or bitcode with text=False) for a C file, as the service's clients produce it."""
    if shutil.which(CLANG) is None:
        pytest.fail(f"{CLANG} is not installed; `make test` installs it (apt-get install clang-19)")
    command = [CLANG, *CLANG_FOR_TUNING, "-S" if text else "-c", *extra, str(source), "-o", "-"]
    return subprocess.run(command, check=True, capture_output=True, text=text).stdout


@pytest.fixture(scope="session", name="compile_c")
def compile_c_fixture():
    """`compile_c(source, *clang_flags, text=True)`: clang-19 -O0 IR of a C file."""
    return compile_c


@pytest.fixture(scope="session")
def c_sources() -> dict[str, Path]:
    return {path.stem: path for path in C_PROGRAMS}


@pytest.fixture(scope="session")
def ir_fixtures() -> Path:
    return IR_FIXTURES


@pytest.fixture(scope="session")
def c_ir() -> dict[str, str]:
    """Program name (file stem) -> clang-19 -O0 IR of tests/data/c/<name>.c."""
    return {path.stem: compile_c(path) for path in C_PROGRAMS}


@pytest.fixture(scope="session")
def loops_ir(c_ir) -> str:
    return c_ir["loops"]


@pytest.fixture(scope="session")
def heavy_ir(tmp_path_factory) -> str:
    """One large function (200 loops) whose -O3 compilation takes about a second."""
    lines = ["float heavy(float *a, float *b, int n) {", "  float s = 0;"]
    for k in range(200):
        lines.append(
            f"  for (int i = 0; i < n; i++) {{ a[i] = a[i] * {k + 1}.5f + b[(i * {k % 7 + 1}) % n];"
            f" s += a[i] / (b[i] + {k}.0f); }}"
        )
    lines += ["  return s;", "}"]
    source = tmp_path_factory.mktemp("heavy") / "heavy.c"
    source.write_text("\n".join(lines) + "\n")
    return compile_c(source)


@pytest.fixture(scope="session")
def typed_pointer_ir() -> str:
    return (IR_FIXTURES / "typed_pointers.ll").read_text()
