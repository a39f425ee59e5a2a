"""Read a C or C++ compiler command line: does optcc take this unit over, and at which size level?

optcc behaves like ccache: invisible except for its benefit. It takes a command over only when the command is
one plain compile (`-c` of exactly one C or C++ source to one object file, with nothing but flags whose whole
effect is carried in the IR) *and* the build asks for size. Every other command runs on the user's clang
exactly as given (same arguments, same object, same exit status).

| command line (one `-c` of one C/C++ source to one object)  | optcc                                 |
|-------------------------------------------------------------|---------------------------------------|
| effective `-Os` or `-Oz` (the last -O flag wins, as in clang)| takes it over at that level           |
| no -O flag                                                  | clang unchanged; with                 |
|                                                             | OPTCC_DEFAULT_LEVEL=s or z: taken over|
| `-O0`, `-O`, `-O1`..`-O3`, `-Ofast`, `-Og`                  | clang unchanged; with OPTCC_FORCE=1:  |
|                                                             | taken over at -Oz (or the default)    |
| `-g...` (debug info), at a size level                       | taken over; an object without debug   |
|                                                             | info is never chosen                  |
| `-flto*`, `-S`, `-E`, `-emit-llvm`, `-M`/`-MM`, linking,    | clang unchanged                       |
| several inputs, assembler and other languages (`.s`, `.m`,  |                                       |
| `.i`, `-x assembler`, ...), `-o -`, stdin                   |                                       |
| codegen-only flags (`-ffunction-sections`, `-mcmodel=`,     | clang unchanged: the service's code   |
| `-gz`, `-gsplit-dwarf`, ...), any flag optcc does not know  | generator would not honour them       |
| a build system's compiler probe (`conftest.c`, CMake's      | clang unchanged: not the product, new |
| try_compile under `CMakeFiles/CMakeScratch`, `meson-private`)| on every configure run                |

C sources are `.c` (or `-x c`); C++ sources are `.cc`, `.cpp`, `.cxx`, `.C` (or `-x c++`). Either entry
point takes either language; as with clang++ itself, optcc++ compiles a `.c` file as C++. A `-x` after the
source passes through (the IR step puts the source last).
-MD/-MMD dependency files are written by clang's own compile of the unit, named as clang names them.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple

SIZE_LEVELS = ("-Os", "-Oz")
SOURCE_LANGUAGES = {".c": "c", ".cc": "c++", ".cpp": "c++", ".cxx": "c++", ".C": "c++"}
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
        "-fcxx-exceptions",
        "-fno-cxx-exceptions",
        "-frtti",
        "-fno-rtti",
        "-fstack-clash-protection",
        "-fno-plt",
    }
)
# Joined flags kept for the IR step: preprocessor, language, diagnostics, debug info, target CPU, and -f
# switches that clang lowers into IR (attributes, metadata, module flags) rather than codegen options.
# Debug flags that only steer the assembler or the object's layout (-gz, -gsplit-dwarf) are not kept, nor
# -grecord-command-line (it would record optcc's scratch file names).
_KEPT_PATTERN = re.compile(
    r"""-[IDU].+
    |-std=.+|-stdlib=.+|-W(?![alp],).*|-g(?!split-dwarf|z|record-).*|-m(arch|tune|cpu)=.+|--sysroot=.+
    |-fvisibility=.+|-fvisibility-inlines-hidden|-ftemplate-depth=.+|-fconstexpr-.+=.+
    |-f(no-)?(strict-aliasing|common|builtin(-.+)?|stack-protector(-.+)?|omit-frame-pointer
        |signed-char|unsigned-char|color-diagnostics|asynchronous-unwind-tables|unwind-tables|cf-protection(=.+)?
        |math-errno|trapping-math|finite-math-only|fast-math|threadsafe-statics|char8_t)
    |-fdiagnostics-.+|-fmessage-length=.+|-f(file|debug|macro)-prefix-map=.+""",
    re.VERBOSE,
)
_OPTIMIZATION = re.compile(r"-O(\d+|s|z|g|fast)?")
_DEPENDENCY_MODES = frozenset({"-MD", "-MMD"})
_DEPENDENCY_WITH_VALUE = frozenset({"-MF", "-MT", "-MQ"})
_LANGUAGES = frozenset(SOURCE_LANGUAGES.values())


# The compile path's records are named tuples, not dataclasses: `dataclasses` (with `inspect`) and building
# each class cost optcc ~15-20 ms of every unit's start (docs/bench/clients.md).
# source, output: the C or C++ source and its object file
# language: "c" or "c++", as the wrapped driver compiles the source (-x, else its suffix)
# level: the -O flag in effect (the last one given), None when there is none
# ir_flags: the command's flags minus -c, -o, -O*, dependency flags and the source
# compile_args: the command minus -o, -O* and dependency flags: clang's own compile
# dependency_flags: -MD/-MMD/-MP/-MF/-MT/-MQ, files and targets named after output
_CompileJob = namedtuple(
    "CompileJob",
    "source output language level ir_flags compile_args dependency_flags",
    defaults=((),),
)


class CompileJob(_CompileJob):
    """One plain compile: `source` (C or C++) to the object file `output`."""

    __slots__ = ()

    @property
    def dependency_file(self) -> str | None:
        """The dependency file clang's compile writes (-MD/-MMD), named as clang names it; None if none."""
        flags = self.dependency_flags
        return next((flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == "-MF"), None)

    def clang_args(self, level: str, output: str) -> list[str]:
        """The unit's own clang compile at `level` into `output` (its dependency file named as the user's)."""
        return [*self.compile_args, *self.dependency_flags, level, "-o", output]


class Decision(namedtuple("Decision", "job level reason")):
    """What optcc does with one command: take `job` over at `level`, or pass it through (`level` None);
    `reason`: why it passes through, empty when taken over."""

    __slots__ = ()


# Units a build system compiles to probe the compiler (autoconf's conftest.c, CMake's try_compile, meson's
# sanity checks): never part of the product, new on every configure run: optcc passes them to clang and the
# service does not record them for tuning (tuning/lookup.py).
_BUILD_PROBE = re.compile(r"(^|/)conftest\.[^/]*$|CMakeFiles/CMake(Scratch|Tmp)/|(^|/)meson-private/")
BUILD_PROBE_REASON = "a build system's compiler probe (configure's conftest.c, CMake's try_compile)"


def is_build_probe(unit_name: str) -> bool:
    """Whether the unit's name (its source path, as optcc sends it) is a build system's compiler probe."""
    return bool(_BUILD_PROBE.search(unit_name))


def decide(
    args: list[str], default_level: str | None = None, force: bool = False, cxx: bool = False
) -> Decision:
    """Apply the table above to `args` (the compiler's arguments without the program name).

    `default_level` (-Os/-Oz, from OPTCC_DEFAULT_LEVEL) is the level of units with no -O flag; `force`
    (OPTCC_FORCE) takes over units at non-size levels too, at `default_level` or -Oz. `cxx`: the wrapped
    compiler is clang++."""
    parsed = _parse(args, cxx)
    if isinstance(parsed, str):
        return Decision(None, None, parsed)
    if is_build_probe(parsed.source):
        return Decision(parsed, None, BUILD_PROBE_REASON)
    if parsed.level in SIZE_LEVELS:
        return Decision(parsed, parsed.level, "")
    if force:
        return Decision(parsed, default_level or "-Oz", "")
    if parsed.level is None:
        if default_level is not None:
            return Decision(parsed, default_level, "")
        return Decision(parsed, None, "no -O flag (OPTCC_DEFAULT_LEVEL=z takes such units over)")
    return Decision(parsed, None, f"{parsed.level} is not a size level (OPTCC_FORCE=1 takes it over)")


def plain_compile(args: list[str], cxx: bool = False) -> CompileJob | None:
    """The compile job in `args` whatever its -O level, or None when the command is not one plain compile."""
    parsed = _parse(args, cxx)
    return None if isinstance(parsed, str) else parsed


def _parse(args: list[str], cxx: bool) -> CompileJob | str:
    """The compile job in `args`, or why the command is not one plain compile optcc can take."""
    compile_only = False
    output = None
    sources: list[tuple[str, str]] = []
    language = None  # the -x in effect for the next input
    level = None
    ir_flags: list[str] = []
    compile_args: list[str] = []
    dependency_flags: list[str] = []
    named: set[str] = set()
    wants_dependencies = False
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        if arg == "-c":
            compile_only = True
            compile_args.append(arg)
        elif arg == "-o" or (arg.startswith("-o") and len(arg) > 2):
            if output is not None or (arg == "-o" and position >= len(args)):
                return "-o given twice or without a file"
            output = arg[2:] if arg != "-o" else args[position]
            position += arg == "-o"
        elif arg == "-x" or (arg.startswith("-x") and len(arg) > 2):
            if arg == "-x" and position >= len(args):
                return "-x without a language"
            language = arg[2:] if arg != "-x" else args[position]
            position += arg == "-x"
            if language not in _LANGUAGES and language != "none":
                return f"language {language} is neither C nor C++"
            if sources:
                return "-x after the source"
            language = None if language == "none" else language
            ir_flags += ["-x", language or "none"]
            compile_args += ["-x", language or "none"]
        elif _OPTIMIZATION.fullmatch(arg):
            level = arg
        elif arg in _DEPENDENCY_MODES or arg == "-MP":
            wants_dependencies = wants_dependencies or arg != "-MP"
            dependency_flags.append(arg)
        elif arg in _DEPENDENCY_WITH_VALUE:
            if position >= len(args):
                return f"{arg} without a value"
            dependency_flags += [arg, args[position]]
            named.add(arg)
            position += 1
        elif arg in _KEPT_WITH_VALUE:
            if position >= len(args):
                return f"{arg} without a value"
            ir_flags += [arg, args[position]]
            compile_args += [arg, args[position]]
            position += 1
        elif arg in _KEPT_EXACT or _KEPT_PATTERN.fullmatch(arg):
            ir_flags.append(arg)
            compile_args.append(arg)
        elif not arg.startswith("-"):
            source_language = language or SOURCE_LANGUAGES.get(os.path.splitext(arg)[1])
            if source_language == "c" and cxx and language is None:  # clang++ compiles .c files as C++
                source_language = "c++"
            if source_language is None:
                return f"input {arg} is not a C or C++ source"
            sources.append((arg, source_language))
            compile_args.append(arg)
        else:  # an unknown flag, `-` (stdin), -E/-S/-M/-MM/-emit-llvm/-flto/...
            return f"{arg} is not a flag optcc takes over"
    if not compile_only:
        return "not a compile to an object (-c)"
    if len(sources) != 1:
        return f"{len(sources)} sources: optcc takes one unit per command"
    if output in ("-", ""):
        return "object written to stdout"
    source, source_language = sources[0]
    output = output or os.path.splitext(os.path.basename(source))[0] + ".o"
    if wants_dependencies:  # name the dependency file and its target after the object, as clang does
        if "-MF" not in named:
            dependency_flags += ["-MF", os.path.splitext(output)[0] + ".d"]
        if "-MT" not in named and "-MQ" not in named:
            dependency_flags += ["-MQ", output]
    return CompileJob(
        source=source,
        output=output,
        language=source_language,
        level=level,
        ir_flags=tuple(ir_flags),
        compile_args=tuple(compile_args),
        dependency_flags=tuple(dependency_flags),
    )


def with_optimization(args: list[str], level: str) -> list[str]:
    """`args` with every -O flag replaced by one `level` (e.g. -Oz)."""
    return [arg for arg in args if not _OPTIMIZATION.fullmatch(arg)] + [level]
