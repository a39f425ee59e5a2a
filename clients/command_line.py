"""Read a C compiler command line: is it one plain compile of C to an object file that optcc can take over?

optcc takes a command only when it is `-c` of exactly one `.c` file to one object file, with nothing but flags
whose whole effect is carried in the IR (preprocessor, language, warnings, debug info, target CPU, PIC and
IR-level code generation switches). Everything else (linking, -E, -S, -M/-MM, -emit-llvm, assembler input,
several inputs, codegen-only flags such as -ffunction-sections or -mcmodel, anything unknown) goes to clang
unchanged, because the service's code generator would not honour it.

-O flags are not forwarded: optcc replaces the optimization level. -MD/-MMD dependency files are written by
the IR step, named as clang names them for the object file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# Flags whose value is the next argument (when not joined), kept for the IR step.
_KEPT_WITH_VALUE = frozenset(
    {"-I", "-D", "-U", "-include", "-imacros", "-isystem", "-iquote", "-idirafter", "-isysroot", "--sysroot"}
)
_KEPT_EXACT = frozenset(
    {
        "-w",
        "-pedantic",
        "-pedantic-errors",
        "-ansi",
        "-pthread",
        "-fPIC",
        "-fpic",
        "-fPIE",
        "-fpie",
        "-fno-pic",
        "-fno-pie",
        "-fno-PIC",
        "-fno-PIE",
        "-fwrapv",
        "-fno-strict-overflow",
        "-fno-delete-null-pointer-checks",
        "-fexceptions",
        "-fno-exceptions",
        "-fstack-clash-protection",
        "-fno-plt",
    }
)
# Joined flags kept for the IR step: preprocessor, language, diagnostics, debug info, target CPU, and -f
# switches that clang lowers into IR (attributes, metadata, module flags) rather than codegen options.
_KEPT_PATTERN = re.compile(
    r"""-[IDU].+
    |-std=.+|-W(?![alp],).*|-g(?!split-dwarf).*|-m(arch|tune|cpu)=.+|--sysroot=.+
    |-fvisibility=.+|-f(no-)?(strict-aliasing|common|builtin(-.+)?|stack-protector(-.+)?|omit-frame-pointer
        |signed-char|unsigned-char|color-diagnostics|asynchronous-unwind-tables|unwind-tables|cf-protection(=.+)?
        |math-errno|trapping-math|finite-math-only|fast-math)
    |-fdiagnostics-.+|-fmessage-length=.+|-f(file|debug|macro)-prefix-map=.+""",
    re.VERBOSE,
)
_OPTIMIZATION = re.compile(r"-O(\d+|s|z|g|fast)?")
_DEPENDENCY_MODES = frozenset({"-MD", "-MMD"})
_DEPENDENCY_WITH_VALUE = frozenset({"-MF", "-MT", "-MQ"})


@dataclass(frozen=True)
class CompileJob:
    """One plain compile optcc takes over: `source` (C) to the object file `output`."""

    source: str
    output: str
    ir_flags: tuple[str, ...]  # the command's flags minus -c, -o and -O*, plus dependency-file names


def plain_compile(args: list[str]) -> CompileJob | None:
    """The compile job in `args` (clang's arguments without the program name), or None to pass through."""
    compile_only = False
    output = None
    sources: list[str] = []
    ir_flags: list[str] = []
    dependency_flags: dict[str, str] = {}
    wants_dependencies = False
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        if arg == "-c":
            compile_only = True
        elif arg == "-o" or (arg.startswith("-o") and len(arg) > 2):
            if output is not None or (arg == "-o" and position >= len(args)):
                return None
            output = arg[2:] if arg != "-o" else args[position]
            position += arg == "-o"
        elif arg == "-x":
            if position >= len(args) or args[position] != "c":
                return None
            position += 1
        elif _OPTIMIZATION.fullmatch(arg):
            continue
        elif arg in _DEPENDENCY_MODES or arg == "-MP":
            wants_dependencies = wants_dependencies or arg != "-MP"
            ir_flags.append(arg)
        elif arg in _DEPENDENCY_WITH_VALUE:
            if position >= len(args):
                return None
            dependency_flags[arg] = args[position]
            ir_flags += [arg, args[position]]
            position += 1
        elif arg in _KEPT_WITH_VALUE:
            if position >= len(args):
                return None
            ir_flags += [arg, args[position]]
            position += 1
        elif arg in _KEPT_EXACT or _KEPT_PATTERN.fullmatch(arg):
            ir_flags.append(arg)
        elif not arg.startswith("-") and arg.endswith(".c"):
            sources.append(arg)
        else:  # unknown flag, other inputs (.s, .o, ...), `-` (stdin), -E/-S/-M/-MM/-emit-llvm/...
            return None
    if not compile_only or len(sources) != 1 or output in ("-", ""):
        return None
    output = output or os.path.splitext(os.path.basename(sources[0]))[0] + ".o"
    if wants_dependencies:  # name the dependency file and its target after the object, as clang does
        if "-MF" not in dependency_flags:
            ir_flags += ["-MF", os.path.splitext(output)[0] + ".d"]
        if "-MT" not in dependency_flags and "-MQ" not in dependency_flags:
            ir_flags += ["-MT", output]
    return CompileJob(source=sources[0], output=output, ir_flags=tuple(ir_flags))


def with_optimization(args: list[str], level: str) -> list[str]:
    """`args` with every -O flag replaced by one `level` (e.g. -Oz), for the fallback compile."""
    return [arg for arg in args if not _OPTIMIZATION.fullmatch(arg)] + [level]
