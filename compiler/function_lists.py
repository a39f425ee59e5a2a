"""Per-function pass lists for a whole translation unit: split it into linkable modules, link them back.

One pass list for a whole unit saves little; per function there is more (docs/bench/function_lists.md). A
unit is split into
  - a *shell* module: every global variable defined (local ones made external so the others can reach
    them), every other function declared; it keeps the module asm and `llvm.used`-like arrays;
  - one module per defined function: that function defined (external), with the static helpers only it
    references (directly or through each other) defined beside it, still internal, so a list with an
    inliner (-Oz) can inline and drop them as -Oz on the whole unit does; the functions and variables it
    references declared; constants it reads are `available_externally` copies, so passes can still fold
    them, while codegen emits them only once (in the shell).
Each function module is optimized with its own list, the modules are linked into the shell (one LLVM
context), symbols that were local get their linkage back, and `globaldce` drops the static functions and
variables nothing uses any more. What this gives up is inter-procedural work across modules (inlining a
function called from several places, propagating constants into a static function's callers); the service
keeps the whole unit's -Oz when that is smaller.

Measured on train/val units (docs/bench/function_lists.md): helpers beside their only caller beat one module
per function (3.23% vs 2.45% of `.text` vs -Oz at 10 coreset lists, with the floor).

Pure functions of IR text; they run LLVM in the calling process (services run them in a CompilerPool worker),
which is where they import llvmlite (compiler/ir.py says why).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optserve.compiler.cost import Objective, object_code, text_size
from optserve.compiler.interface import Evaluation
from optserve.compiler.ir import (
    _COMDAT,
    _TYPE_DEFINITION,
    IRError,
    Stop,
    _declaration,
    _definitions_as_printed,
    _external_definition,
    _global_for_split,
    _global_kind,
    _reachable_symbols,
    _symbols_in,
    check_stop,
    compile_input,
    module_instruction_count,
    parse_module,
)
from optserve.compiler.passes import PassListError
from optserve.compiler.pipeline import OZ, optimize_module

if TYPE_CHECKING:
    import llvmlite.binding as llvm

_LOCAL_LINKAGES = {"private", "internal"}
# Passes after linking: drop what became dead (static helpers, their constants, unused declarations).
CLEANUP = ("globaldce", "strip-dead-prototypes")
# `@name = [linkage] ...`: the linkage keyword, if any, right after the `=`.
_GLOBAL_LINKAGE = re.compile(
    r"^(@(?:\"(?:[^\"\\]|\\.)*\"|[-a-zA-Z$._0-9]+) = )"
    r"(?:(private|internal|available_externally|linkonce_odr|linkonce|weak_odr|weak|common|appending"
    r"|extern_weak|external) )?"
)


@dataclass(frozen=True)
class UnitParts:
    """A unit split for per-function optimization; `link` puts (optimized) parts back together."""

    shell: str  # global variables and declarations of every function
    functions: dict[str, str]  # name -> module defining that function (and its private helpers, below)
    members: dict[str, list[str]]  # name -> that function, then the static functions only it references
    local_linkage: dict[str, str]  # symbol -> 'private' / 'internal', restored after linking


@dataclass(frozen=True)
class FunctionLists:
    """Pass lists per function as one candidate for a whole unit: what `apply_function_lists` applies, and
    what a CompilerPool compiles in place of a pass list (one job per unit)."""

    lists: tuple[tuple[str, tuple[str, ...]], ...]  # (function name, pass list), sorted by name
    default: tuple[str, ...] = OZ  # for functions not named
    cleanup: tuple[str, ...] = CLEANUP  # on the linked unit
    # True: the functions on the default list stay together in one module (the unit less the functions
    # with a list of their own), optimized as one, so the default's inliner and IPO work across them.
    grouped: bool = False

    @classmethod
    def of(
        cls,
        lists: Mapping[str, Sequence[str]],
        default: Sequence[str] = OZ,
        cleanup: Sequence[str] = CLEANUP,
        grouped: bool = False,
    ) -> FunctionLists:
        pairs = tuple(sorted((n, tuple(p)) for n, p in lists.items()))
        return cls(pairs, tuple(default), tuple(cleanup), grouped)

    def own(self, names: Sequence[str]) -> list[str]:
        """Of `names`, the functions with a list other than the default (all of them when not grouped)."""
        if not self.grouped:
            return list(names)
        return [name for name in names if self.for_function(name) != self.default]

    def for_function(self, name: str) -> tuple[str, ...]:
        return dict(self.lists).get(name, self.default)


_DEFINE = re.compile(r"^define ", re.MULTILINE)


def defined_function_count(ir: str) -> int:
    """How many functions textual IR defines (a split's upper bound of function modules), without parsing."""
    return len(_DEFINE.findall(ir))


def split_unit(ir: str, stop: Stop | None = None) -> UnitParts:
    """The unit as a shell and one module per defined function (IRError for what it cannot split: aliases
    and ifuncs, or a function whose module does not verify). `stop()` is asked before each function module
    is built (StoppedError)."""
    split = _split_texts(ir, stop)
    parts = {}
    for root, text in split.functions.items():
        check_stop(stop, "splitting the unit")
        parts[root] = _printed(parse_module(text, printed_here=True))
    shell = _printed(parse_module(split.shell, printed_here=True))
    return UnitParts(shell, parts, split.members, split.local_linkage)


def _split_modules(
    ir: str | bytes, context: llvm.ContextRef
) -> tuple[UnitParts, llvm.ModuleRef, dict[str, llvm.ModuleRef]]:
    """`split_unit`'s split as modules of one `context` (the shell, and one per function), parsed and
    verified from the text the split assembles and never printed: `apply_function_lists` optimizes and links
    them as they are, which gives the objects that printing each and parsing it back gave (checked on real
    units: benchmarks/tuned_compile.py), without those round trips. The UnitParts' `shell` is the shell's
    assembled text and `functions` the functions' (what `split_unit` prints from)."""
    split = _split_texts(ir, None)
    modules: dict[str, llvm.ModuleRef] = {}
    try:
        for root, text in split.functions.items():
            modules[root] = parse_module(text, printed_here=True, context=context)
        return split, parse_module(split.shell, printed_here=True, context=context), modules
    except BaseException:  # those parsed closed before their context goes (see split_unit)
        for module in modules.values():
            module.close()
        raise


def _split_texts(ir: str | bytes, stop: Stop | None) -> UnitParts:
    """The split's texts as assembled (not yet parsed): the shell, and per function the module's text.
    `ir`: `parse_ir`'s text, or the unit as a client sent it (`compile_input`)."""
    module = compile_input(ir)
    try:
        return _split(module, stop)
    finally:
        # Closed here, on every path: a module left to the garbage collector (held by an exception's
        # traceback, e.g. on a request cut by its deadline) may be freed after its own context, which
        # crashes in LLVMContext::removeModule (seen in the ingress, splitting in a thread).
        module.close()


def _split(module, stop: Stop | None) -> UnitParts:
    check_stop(stop, "parsing the unit")  # each step before the loop takes up to a few tenths of a second
    printed = str(module)
    check_stop(stop, "printing the unit")
    if re.search(r"^@[^=\n]+ = [^\n]*\b(alias|ifunc)\b", printed, re.MULTILINE):
        raise IRError("the unit has aliases or ifuncs, which per-function splitting does not handle")
    lines = printed.splitlines()
    header, types, comdats, module_asm, attribute_groups, metadata_lines = _module_lines(lines)
    header += types
    metadata = _Metadata(metadata_lines)

    functions = {function.name: function for function in module.functions}
    variables = {variable.name: variable for variable in module.global_variables}
    variable_texts = {name: str(variable) for name, variable in variables.items()}
    local_linkage = {
        value.name: value.linkage.name
        for value in [*functions.values(), *variables.values()]
        if value.linkage.name in _LOCAL_LINKAGES
    }
    definitions = _definitions_as_printed(lines, [f.name for f in module.functions if not f.is_declaration])
    check_stop(stop, "reading the unit's functions")
    groups = _groups(definitions, local_linkage, variable_texts)
    helpers = {name for members in groups.values() for name in members[1:]}
    shell = [*header, *comdats, *module_asm]
    shell += [_external(variable_texts[name]) for name in variables]
    # Helpers are not declared: their one copy, in their caller's module, keeps its name when linked.
    shell += [_declaration(function) for name, function in functions.items() if name not in helpers]
    shell_text = "\n".join([*shell, *attribute_groups, *metadata.needed_by(shell)]) + "\n"

    parts = {}
    for root, members in groups.items():
        check_stop(stop, "splitting the unit")
        body = "\n".join(definitions[m] for m in members)
        needed_functions, needed_variables = _reachable_symbols(
            body, root, functions, variables, variable_texts
        )
        text = [*header]
        text += [_for_function_module(variables[v], variable_texts[v]) for v in needed_variables]
        text += [_declaration(functions[f]) for f in needed_functions if f not in members]
        text += [_external_definition(definitions[root]), *(definitions[m] for m in members[1:])]
        text += [*attribute_groups, *metadata.needed_by(text)]
        parts[root] = "\n".join(text) + "\n"
    return UnitParts(shell_text, parts, dict(groups), local_linkage)


def _module_lines(lines: list[str]) -> tuple[list[str], ...]:
    """Of a module's printed lines, in their order: the target and source file lines, the named types'
    definitions, the comdats, the module asm, the attribute groups and the metadata. One pass that looks at
    a line's first character before testing it (a `-g` unit's text is mostly metadata and function
    bodies): the lines each test picks, tested on every line as before."""
    targets: list[str] = []
    types: list[str] = []
    comdats: list[str] = []
    module_asm: list[str] = []
    attribute_groups: list[str] = []
    metadata: list[str] = []
    for line in lines:
        first = line[:1]
        if first == "!":
            metadata.append(line)
        elif first == "%":
            if _TYPE_DEFINITION.match(line):
                types.append(line)
        elif first == "$":
            comdats.append(line)
        elif first in ("t", "s"):
            if line.startswith(("target ", "source_filename")):
                targets.append(line)
        elif first == "m":
            if line.startswith("module asm "):
                module_asm.append(line)
        elif first == "a" and line.startswith("attributes #"):
            attribute_groups.append(line)
    return targets, types, comdats, module_asm, attribute_groups, metadata


class _Metadata:
    """A unit's metadata lines, and for a part of it the ones that part reaches: the named nodes (module
    flags, the compile unit) and every numbered node reachable from them or from the part's text. LLVM
    prints only the metadata a module reaches, so a part's module is the same with these lines as with
    all of them; with debug info (most of a -g unit's text) it parses in a fraction of the time."""

    _NUMBERED = re.compile(r"!(\d+) = ")
    _REFERENCE = re.compile(r"!(\d+)")

    def __init__(self, lines: list[str]):
        self.named: list[str] = []
        self.numbered: dict[str, tuple[int, str]] = {}  # number -> (position, line)
        match = self._NUMBERED.match
        for position, line in enumerate(lines):
            found = match(line)
            if found:
                self.numbered[found.group(1)] = (position, line)
            else:
                self.named.append(line)
        self._references: dict[str, list[str]] = {}
        self._from_named = self._reached(self._REFERENCE.findall("\n".join(self.named)), frozenset())
        # the lines every part needs, in the unit's order: a part's own are merged into them
        self._from_named_positions = sorted(self.numbered[n][0] for n in self._from_named)
        self._lines = lines

    def needed_by(self, text: list[str]) -> list[str]:
        """The named lines and the numbered lines `text` and they reach, in the unit's order."""
        reached = self._reached(self._REFERENCE.findall("\n".join(text)), self._from_named)
        positions = self._from_named_positions + sorted(self.numbered[n][0] for n in reached)
        positions.sort()  # two sorted runs: merged
        return [*self.named, *(self._lines[p] for p in positions)]

    def _reached(self, pending: list[str], known: frozenset[str] | set[str]) -> set[str]:
        """The numbered nodes `pending` reach, those in `known` (and what they reach) left out."""
        reached: set[str] = set()
        numbered = self.numbered
        while pending:
            number = pending.pop()
            if number in reached or number in known or number not in numbered:
                continue
            reached.add(number)
            pending.extend(self._refers_to(number))
        return reached

    def _refers_to(self, number: str) -> list[str]:
        if number not in self._references:
            line = self.numbered[number][1]
            self._references[number] = self._REFERENCE.findall(line, line.index("=") + 1)
        return self._references[number]


def _printed(module) -> str:
    """The module's text; the module is closed before its context can go (see split_unit)."""
    try:
        return str(module)
    finally:
        module.close()


def _groups(
    definitions: dict[str, str], local_linkage: dict[str, str], variable_texts: dict[str, str]
) -> dict[str, list[str]]:
    """Each function with the static functions only it reaches (directly or through other such helpers).

    -Oz on the whole unit inlines a static helper called from one place and deletes it; in a module of
    its own the helper would be external and stay. A helper referenced by one function only (not by a
    global's initializer) therefore joins that function's module, where it stays internal.
    """
    referrers: dict[str, set[str]] = {name: set() for name in definitions}
    for name, definition in definitions.items():
        for symbol in set(_symbols_in(definition)) - {name}:
            if symbol in referrers:
                referrers[symbol].add(name)
    for text in variable_texts.values():
        for symbol in _symbols_in(text):
            if symbol in referrers:
                referrers[symbol].add("")  # pinned: a global refers to it
    owner = {
        name: next(iter(callers))
        for name, callers in referrers.items()
        if local_linkage.get(name) and len(callers) == 1 and "" not in callers
    }

    def root_of(name: str) -> str:
        seen = {name}
        while name in owner and owner[name] not in seen:
            name = owner[name]
            seen.add(name)
        return name if name not in owner else min(seen)  # a cycle of helpers: its first name is the root

    groups: dict[str, list[str]] = {}
    for name in definitions:
        groups.setdefault(root_of(name), [])
    for name in definitions:
        root = root_of(name)
        groups[root].append(name) if name != root else groups[root].insert(0, name)
    return groups


def _external(variable_text: str) -> str:
    """A global variable's definition with private/internal linkage dropped (external)."""
    return _GLOBAL_LINKAGE.sub(
        lambda m: m.group(1) if m.group(2) in _LOCAL_LINKAGES else m.group(0), variable_text, 1
    )


def _for_function_module(variable, text: str) -> str:
    """A constant with a definitive initializer as an `available_externally` copy; anything else declared."""
    linkage = variable.linkage.name
    if (
        _global_kind(text) == "constant"
        and not variable.is_declaration
        and linkage in (_LOCAL_LINKAGES | {"external"})
    ):
        copy = _GLOBAL_LINKAGE.sub(lambda m: f"{m.group(1)}available_externally ", text, 1)
        return _COMDAT.sub("", copy)
    return _global_for_split(_Declared(variable), text)


class _Declared:
    """A variable seen as a declaration (so `_global_for_split` writes `external`)."""

    def __init__(self, variable):
        self.name, self.global_value_type, self.is_declaration = (
            variable.name,
            variable.global_value_type,
            True,
        )


def _restore_local_linkage(
    unit: llvm.ModuleRef, parts: UnitParts, keep: frozenset[str] = frozenset()
) -> None:
    """Give the unit's symbols their local linkage back (the split made them external), except `keep`."""
    for name, linkage in parts.local_linkage.items():
        value = _global_value(unit, name)
        if name not in keep and value is not None and not value.is_declaration:
            value.linkage = linkage


def _referenced_outside(module: llvm.ModuleRef) -> set[str]:
    """Symbols an optimized function module takes from elsewhere: its declarations and constant copies."""
    names = {f.name for f in module.functions if f.is_declaration}
    return names | {
        v.name
        for v in module.global_variables
        if v.is_declaration or v.linkage.name == "available_externally"
    }


def _global_value(module: llvm.ModuleRef, name: str):
    for getter in (module.get_function, module.get_global_variable):
        try:
            return getter(name)
        except NameError:
            continue
    return None


def apply_function_lists(
    ir: str | bytes,
    function_lists: FunctionLists,
    objective: Objective | str = Objective.TEXT_SIZE,
    want_ir: bool = False,
    want_object: bool = False,
) -> Evaluation:
    """Optimize each function module of `ir` (`split_unit`) with its list, link, drop what became dead,
    verify and measure: the Evaluation of the whole unit (an error Evaluation for bad IR, a list that
    fails, or a linked module that does not verify). `ir`: `parse_ir`'s text, or the unit's bytes as a
    client sent them, read here (`compile_input`).

    The modules live in one LLVM context from the split to the object (`_split_modules`): each function
    module is optimized and linked into the shell as it is, not printed and parsed again (the objects are
    the same; the round trips were a third of a tuned unit's compile on mxml's `-g` units)."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    started = time.perf_counter()
    objective = Objective(objective)
    context = llvm.create_context()
    modules: dict[str, llvm.ModuleRef] = {}
    unit = None
    try:
        parts, unit, modules = _split_modules(ir, context)
        own = function_lists.own(list(modules))
        for name in own:
            optimize_module(modules[name], function_lists.for_function(name))
        if len(own) == len(modules):
            for name in list(modules):
                unit.link_in(modules.pop(name))
            _restore_local_linkage(unit, parts)
            unit.verify()
        else:
            _link_rest_then_own(unit, parts, modules, own, function_lists.default)
        optimize_module(unit, function_lists.cleanup)
        unit.verify()
        # Read the IR (and count its instructions) before emitting code: codegen rewrites the module.
        optimized_ir = str(unit) if want_ir else None
        instructions = module_instruction_count(unit) if objective is Objective.INSTRUCTION_COUNT else None
        code = object_code(unit) if want_object or objective is Objective.TEXT_SIZE else None
        cost = text_size(code) if objective is Objective.TEXT_SIZE else instructions
        seconds = time.perf_counter() - started
        return Evaluation(function_lists, cost, None, seconds, optimized_ir, code if want_object else None)
    except (IRError, PassListError, RuntimeError) as err:
        return Evaluation(function_lists, None, f"{type(err).__name__}: {err}", time.perf_counter() - started)
    finally:  # before their context goes (see split_unit); a module linked in is gone with it
        for module in [*modules.values(), *([unit] if unit is not None else [])]:
            module.close()


def _link_rest_then_own(
    unit: llvm.ModuleRef,
    parts: UnitParts,
    modules: dict[str, llvm.ModuleRef],
    own: Sequence[str],
    default: Sequence[str],
) -> None:
    """Grouped lists: the functions not in `own` linked into the shell `unit` as one module, their symbols
    local again where no optimized module refers to them, optimized with `default` as a unit; then the
    optimized modules (`own`, taken out of `modules` as they are linked) linked in and every local linkage
    restored (as for lists that are not grouped)."""
    for name in [name for name in modules if name not in own]:
        unit.link_in(modules.pop(name))
    used = frozenset(symbol for name in own for symbol in _referenced_outside(modules[name]))
    _restore_local_linkage(unit, parts, keep=used)
    unit.verify()
    optimize_module(unit, default)
    for name in own:
        unit.link_in(modules.pop(name))
    _restore_local_linkage(unit, parts)
    unit.verify()
