"""Which compiler command lines optcc takes over, at which level, and how it rewrites them (the rules table
of clients/command_line.py, row by row)."""

from __future__ import annotations

import pytest

from optserve.clients.command_line import CompileJob, decide, plain_compile, with_optimization


def test_plain_compile_keeps_ir_flags_and_the_last_optimization_level():
    job = plain_compile(
        ["-O3", "-g", "-DNDEBUG", "-I", "include", "-fPIC", "-Wall", "-c", "a.c", "-Oz", "-o", "out/a.o"]
    )
    assert job == CompileJob(
        source="a.c",
        output="out/a.o",
        language="c",
        level="-Oz",
        ir_flags=("-g", "-DNDEBUG", "-I", "include", "-fPIC", "-Wall"),
        compile_args=("-g", "-DNDEBUG", "-I", "include", "-fPIC", "-Wall", "-c", "a.c"),
    )
    assert job.clang_args("-Oz", "/tmp/x.o") == [*job.compile_args, "-Oz", "-o", "/tmp/x.o"]


def test_output_defaults_to_the_source_name_in_the_current_directory():
    assert plain_compile(["-c", "src/lib.c"]).output == "lib.o"


def test_dependency_files_are_named_after_the_object_not_the_scratch_file():
    job = plain_compile(["-MD", "-MP", "-c", "a.c", "-o", "obj/a.o"])
    assert job.ir_flags == () and job.dependency_flags == ("-MD", "-MP", "-MF", "obj/a.d", "-MQ", "obj/a.o")
    assert job.clang_args("-Os", "scratch.o")[-7:] == [
        "-MF",
        "obj/a.d",
        "-MQ",
        "obj/a.o",
        "-Os",
        "-o",
        "scratch.o",
    ]
    given = plain_compile(["-MMD", "-MF", "deps/a.dep", "-MT", "target", "-c", "a.c", "-o", "a.o"])
    assert given.dependency_flags == ("-MMD", "-MF", "deps/a.dep", "-MT", "target")


@pytest.mark.parametrize(
    ("args", "language"),
    [
        (["-c", "a.c"], "c"),
        (["-c", "a.cc"], "c++"),
        (["-c", "a.cpp"], "c++"),
        (["-c", "a.cxx"], "c++"),
        (["-c", "a.C"], "c++"),
        (["-x", "c++", "-c", "a.inc"], "c++"),
        (["-xc", "-c", "a.h.in"], "c"),
        (["-std=c++17", "-fno-rtti", "-fexceptions", "-fvisibility-inlines-hidden", "-c", "a.cc"], "c++"),
    ],
)
def test_c_and_cxx_sources_are_units(args, language):
    job = plain_compile(args)
    assert job is not None and job.language == language


def test_the_ir_step_compiles_the_source_as_the_users_driver_does():
    assert plain_compile(["-c", "a.c"], cxx=True).language == "c++"  # clang++ compiles .c as C++
    assert plain_compile(["-x", "c", "-c", "a.c"], cxx=True).language == "c"
    assert plain_compile(["-x", "c++", "-c", "a.inc"]).ir_flags == ("-x", "c++")  # kept before the source
    assert decide(["-Oz", "-c", "a.cc", "-x", "c"]).reason == "-x after the source"


# The rules table: (arguments, OPTCC_DEFAULT_LEVEL, OPTCC_FORCE) -> the level taken over at, or None.
RULES = [
    # effective -Os/-Oz: taken over at that level; the last -O flag wins
    (["-Oz", "-c", "a.c"], None, False, "-Oz"),
    (["-Os", "-c", "a.c"], None, False, "-Os"),
    (["-O2", "-c", "a.c", "-Os"], None, False, "-Os"),
    (["-Oz", "-c", "a.c", "-O2"], None, False, None),
    (["-Oz", "-g", "-c", "a.c"], None, False, "-Oz"),  # debug info: taken, the object keeps it
    (["-Os", "-ggdb3", "-c", "a.cpp"], None, False, "-Os"),
    # no -O flag: through, unless OPTCC_DEFAULT_LEVEL
    (["-c", "a.c"], None, False, None),
    (["-c", "a.c"], "-Oz", False, "-Oz"),
    (["-c", "a.c"], "-Os", False, "-Os"),
    # other levels: through, unless OPTCC_FORCE
    (["-O0", "-g", "-c", "a.c"], None, False, None),
    (["-O", "-c", "a.c"], None, False, None),
    (["-O1", "-c", "a.c"], None, False, None),
    (["-O2", "-c", "a.c"], None, False, None),
    (["-O3", "-c", "a.c"], None, False, None),
    (["-Ofast", "-c", "a.c"], None, False, None),
    (["-Og", "-c", "a.c"], "-Oz", False, None),  # the default level is only for units without -O
    (["-O2", "-c", "a.c"], None, True, "-Oz"),
    (["-O0", "-c", "a.c"], "-Os", True, "-Os"),
    (["-c", "a.c"], None, True, "-Oz"),
    # never taken, whatever the level or the settings
    (["-Oz", "-flto", "-c", "a.c"], None, True, None),
    (["-Oz", "-flto=thin", "-c", "a.c"], None, True, None),
    (["-Oz", "-S", "a.c"], None, True, None),
    (["-Oz", "-E", "a.c"], None, True, None),
    (["-Oz", "-c", "-emit-llvm", "a.c"], None, True, None),
    (["-Oz", "-M", "a.c"], None, True, None),
    (["-Oz", "-MM", "-c", "a.c"], None, True, None),
    (["-Oz", "a.o", "b.o", "-o", "program"], None, True, None),  # linking
    (["-Oz", "a.c", "-o", "program"], None, True, None),  # compile and link
    (["-Oz", "-c", "a.c", "b.c"], None, True, None),  # several units
    (["-Oz", "-c", "start.s"], None, True, None),  # assembler
    (["-Oz", "-c", "start.S"], None, True, None),
    (["-Oz", "-c", "-x", "assembler", "a.c"], None, True, None),
    (["-Oz", "-c", "a.m"], None, True, None),  # Objective-C
    (["-Oz", "-c", "a.i"], None, True, None),  # preprocessed
    (["-Oz", "-c", "-x", "cuda", "a.cu"], None, True, None),
    (["-Oz", "-c", "a.c", "-ffunction-sections"], None, True, None),  # codegen-only flags
    (["-Oz", "-c", "a.c", "-mcmodel=large"], None, True, None),
    (["-Oz", "-c", "a.c", "-gsplit-dwarf"], None, True, None),
    (["-Oz", "-c", "a.c", "-gz"], None, True, None),
    (["-Oz", "-c", "a.c", "-grecord-command-line"], None, True, None),
    (["-Oz", "-c", "a.c", "-Wl,--as-needed"], None, True, None),
    (["-Oz", "-c", "a.c", "-o", "-"], None, True, None),
    (["-Oz", "-c", "-"], None, True, None),
    (["-Oz", "-c", "a.c", "-o"], None, True, None),
    (["-Oz", "-c", "a.c", "--frobnicate"], None, True, None),  # unknown
    (["--help"], None, True, None),
    (["--version"], None, True, None),
]


@pytest.mark.parametrize(("args", "default_level", "force", "level"), RULES)
def test_the_rules_table(args, default_level, force, level):
    decision = decide(args, default_level, force)
    assert decision.level == level
    assert (decision.reason == "") == (level is not None)


def test_pass_through_says_why():
    assert decide(["-O2", "-c", "a.c"]).reason == "-O2 is not a size level (OPTCC_FORCE=1 takes it over)"
    assert "OPTCC_DEFAULT_LEVEL" in decide(["-c", "a.c"]).reason
    assert decide(["-Oz", "-flto", "-c", "a.c"]).reason == "-flto is not a flag optcc takes over"
    assert decide(["-Oz", "-c", "a.c", "b.c"]).reason == "2 sources: optcc takes one unit per command"


def test_with_optimization_replaces_every_level_with_one():
    assert with_optimization(["-O2", "-c", "a.c", "-Os", "-o", "a.o"], "-Oz") == [
        "-c",
        "a.c",
        "-o",
        "a.o",
        "-Oz",
    ]


@pytest.mark.parametrize(
    "source",
    ["conftest.c", "/tmp/b/CMakeFiles/CMakeScratch/TryCompile-a1b2/src.c", "build/meson-private/sanity.c"],
)
def test_build_system_probes_go_to_clang_unchanged_at_any_level(source):
    decision = decide(["-Oz", "-c", source, "-o", "conftest.o"], default_level="-Oz", force=True)
    assert decision.level is None and "probe" in decision.reason and decision.job.source == source
