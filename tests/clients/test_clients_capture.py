"""optcc's capture mode: the unit optcc would send is stored, and the build gets clang's own object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from optserve.compiler.ir import parse_ir

OPTCC = Path(sys.executable).with_name("optcc")
SOURCE = Path(__file__).resolve().parent.parent / "data" / "c" / "loops.c"


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=os.environ | env, capture_output=True, timeout=120)


def test_capture_stores_the_unit_and_builds_what_clang_builds(tmp_path):
    capture = tmp_path / "capture"
    flags = ["-O2", "-DLIMIT=7", "-c", str(SOURCE)]
    wrapped = run(
        [str(OPTCC), *flags, "-o", "wrapped.o"],
        tmp_path,
        OPTCC_CAPTURE=str(capture),
        OPTCC_CAPTURE_TAG="demo",
    )
    assert wrapped.returncode == 0, wrapped.stderr
    assert run(["clang-19", *flags, "-o", "plain.o"], tmp_path).returncode == 0
    assert (tmp_path / "wrapped.o").read_bytes() == (tmp_path / "plain.o").read_bytes()

    [record] = [json.loads(line) for line in (capture / "captured.jsonl").read_text().splitlines()]
    assert record["tag"] == "demo" and record["source"] == str(SOURCE) and "-DLIMIT=7" in record["ir_flags"]
    bitcode = (capture / "units" / f"{record['sha256']}.bc").read_bytes()
    assert len(bitcode) == record["bytes"]
    assert "define" in parse_ir(bitcode, max_bytes=1 << 24)  # the unit is real, readable IR


def test_capture_ignores_commands_optcc_would_not_take_over(tmp_path):
    capture = tmp_path / "capture"
    linked = run(
        [str(OPTCC), "-shared", "-fPIC", str(SOURCE), "-o", "libloops.so"],
        tmp_path,
        OPTCC_CAPTURE=str(capture),
    )
    preprocessed = run([str(OPTCC), "-E", str(SOURCE), "-o", "loops.i"], tmp_path, OPTCC_CAPTURE=str(capture))
    assert linked.returncode == 0 and preprocessed.returncode == 0
    assert (tmp_path / "libloops.so").exists() and (tmp_path / "loops.i").exists()
    assert not (capture / "captured.jsonl").exists()


def test_capture_records_a_unit_that_does_not_compile_and_clang_reports_it(tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("int f(void) { return missing; }\n")
    capture = tmp_path / "capture"
    result = run([str(OPTCC), "-c", str(broken), "-o", "broken.o"], tmp_path, OPTCC_CAPTURE=str(capture))
    assert result.returncode != 0 and b"missing" in result.stderr
    [record] = [json.loads(line) for line in (capture / "captured.jsonl").read_text().splitlines()]
    assert record["sha256"] is None and "missing" in record["error"]


def test_capture_takes_each_source_of_a_multi_source_compile(tmp_path):
    for name in ("one", "two"):
        (tmp_path / f"{name}.c").write_text(f"int {name}(int x) {{ return x * 3 + 1; }}\n")
    capture = tmp_path / "capture"
    command = [
        str(OPTCC),
        "-Qunused-arguments",
        "-Wa,--noexecstack",
        "-Wl,-z,relro",
        "-Oz",
        "-c",
        "one.c",
        "two.c",
    ]
    assert run(command, tmp_path, OPTCC_CAPTURE=str(capture)).returncode == 0
    assert (tmp_path / "one.o").exists() and (tmp_path / "two.o").exists()
    records = [json.loads(line) for line in (capture / "captured.jsonl").read_text().splitlines()]
    assert sorted(Path(r["source"]).name for r in records) == ["one.c", "two.c"]
    assert all(r["sha256"] for r in records)
