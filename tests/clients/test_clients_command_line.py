"""Which compiler command lines optcc takes over, and how it rewrites them."""

from __future__ import annotations

import pytest

from optserve.clients.command_line import CompileJob, plain_compile, with_optimization


def test_plain_compile_keeps_ir_flags_and_drops_optimization():
    job = plain_compile(
        ["-O3", "-g", "-DNDEBUG", "-I", "include", "-fPIC", "-Wall", "-c", "a.c", "-o", "out/a.o"]
    )
    assert job == CompileJob(
        source="a.c", output="out/a.o", ir_flags=("-g", "-DNDEBUG", "-I", "include", "-fPIC", "-Wall")
    )


def test_output_defaults_to_the_source_name_in_the_current_directory():
    assert plain_compile(["-c", "src/lib.c"]).output == "lib.o"


def test_dependency_files_are_named_after_the_object():
    job = plain_compile(["-MD", "-MP", "-c", "a.c", "-o", "obj/a.o"])
    assert job.ir_flags == ("-MD", "-MP", "-MF", "obj/a.d", "-MT", "obj/a.o")
    given = plain_compile(["-MMD", "-MF", "deps/a.dep", "-MT", "target", "-c", "a.c", "-o", "a.o"])
    assert given.ir_flags == ("-MMD", "-MF", "deps/a.dep", "-MT", "target")


@pytest.mark.parametrize(
    "args",
    [
        ["a.o", "b.o", "-o", "program"],  # linking
        ["a.c", "-o", "program"],  # compile and link
        ["-E", "a.c"],
        ["-S", "a.c"],
        ["-M", "a.c"],
        ["-c", "-emit-llvm", "a.c"],
        ["-c", "start.s"],  # assembler input
        ["-c", "a.c", "b.c"],  # several units
        ["-c", "a.c", "-ffunction-sections"],  # codegen-only flag
        ["-c", "a.c", "-mcmodel=large"],
        ["-c", "a.c", "-gsplit-dwarf"],
        ["-c", "a.c", "-Wl,--as-needed"],
        ["-c", "-x", "assembler", "a.c"],
        ["-c", "a.c", "-o", "-"],
        ["-c", "-"],
        ["-c", "a.c", "-o"],
        ["-c", "a.c", "--frobnicate"],  # unknown
    ],
)
def test_everything_but_a_plain_compile_passes_through(args):
    assert plain_compile(args) is None


def test_fallback_replaces_every_optimization_level_with_one():
    assert with_optimization(["-O2", "-c", "a.c", "-Os", "-o", "a.o"], "-Oz") == [
        "-c",
        "a.c",
        "-o",
        "a.o",
        "-Oz",
    ]
