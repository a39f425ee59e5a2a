"""Turn one source file into unoptimized LLVM IR text: clang-19 for C, comment stripping for LLVM's .ll tests.

The flags are those the service's clients use (REFERENCE.md): `-O0` without `optnone`, so every pass can run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from optserve.corpus.sources import CSMITH_INCLUDE, SourceFile

CLANG = "clang-19"
CLANG_FLAGS = ("-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-S", "-w", "-g0")
# Old GCC tests rely on C89 leniencies that clang 19 makes errors by default (torture success 72% -> 97%).
GCC_COMPAT_FLAGS = (
    "-Wno-error=implicit-int",
    "-Wno-error=implicit-function-declaration",
    "-Wno-error=int-conversion",
    "-Wno-error=incompatible-pointer-types",
    "-Wno-error=incompatible-function-pointer-types",
    "-Wno-error=return-type",
)


class CompileError(RuntimeError):
    """clang rejected the file, or it ran out of time."""


def compile_flags(source_file: SourceFile) -> tuple[str, ...]:
    """All clang-19 flags used for one source file (recorded in the build stats)."""
    extra = ("-I", str(CSMITH_INCLUDE)) if source_file.source == "csmith" else GCC_COMPAT_FLAGS
    return (*CLANG_FLAGS, *extra)


def compile_c(source_file: SourceFile, timeout_s: float) -> str:
    """clang-19 -O0 IR of a C file, as text."""
    cmd = [CLANG, *compile_flags(source_file), str(source_file.local_path), "-o", "-"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, errors="replace")
    except subprocess.TimeoutExpired as err:
        raise CompileError(f"clang-19 took longer than {timeout_s:g} s") from err
    if proc.returncode != 0:
        first_error = next((line for line in proc.stderr.splitlines() if "error" in line), proc.stderr[:200])
        raise CompileError(f"clang-19 exit {proc.returncode}: {first_error.strip()[:300]}")
    return proc.stdout


def strip_test_comments(ll_text: str) -> str:
    """An LLVM regression test without its whole-line comments (RUN/CHECK lines and notes)."""
    return "".join(line for line in ll_text.splitlines(keepends=True) if not line.lstrip().startswith(";"))


def source_ir(source_file: SourceFile, timeout_s: float) -> str:
    """The unoptimized IR of a source file: compiled C, or the .ll test itself."""
    if source_file.language == "llvm-ir":
        return strip_test_comments(Path(source_file.local_path).read_text(errors="replace"))
    return compile_c(source_file, timeout_s)
