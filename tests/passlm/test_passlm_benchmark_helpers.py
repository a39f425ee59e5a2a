"""What the unit and engine benchmarks share (passlm/evaluation/: held_out_units, engine_latency): clang's own
size of a unit and the functions the engine's latency is measured on. Real clang-19."""

from __future__ import annotations

import subprocess
from pathlib import Path

from optserve.compiler.cost import text_size
from optserve.passlm.evaluation.engine_latency import percentile, small_functions
from optserve.passlm.evaluation.held_out_units import clang_oz

C_SOURCES = Path(__file__).resolve().parents[1] / "data" / "c"


def test_clangs_size_of_a_unit_is_the_text_of_clang_oz_of_its_ir(tmp_path):
    ir = subprocess.run(
        ["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-S", "-w", "-o", "-",
         str(C_SOURCES / "loops.c")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    (tmp_path / "unit.ll").write_text(ir)
    obj = tmp_path / "unit.o"
    subprocess.run(["clang-19", "-Oz", "-c", "-x", "ir", tmp_path / "unit.ll", "-o", obj], check=True)
    text, seconds = clang_oz(ir)
    assert text == text_size(obj.read_bytes()) > 0 and seconds > 0


def test_ir_clang_cannot_compile_has_no_size():
    text, _ = clang_oz("define i32 @broken( {\n")
    assert text is None


def test_the_engines_functions_come_from_every_program_in_turn_within_the_size_limit():
    functions = small_functions(C_SOURCES, 2048, 6)
    programs = [name.split(":")[0] for name, _ in functions]
    assert len(functions) == 6 and len(set(programs)) == 6  # six C files, one function of each first
    assert small_functions(C_SOURCES, 1, 6) == []  # no function's IR fits one byte


def test_the_99th_percentile_of_few_requests_is_the_slowest():
    assert percentile([0.3, 0.1, 0.2], 99) == 0.3 and percentile([0.3, 0.1, 0.2], 50) == 0.2
