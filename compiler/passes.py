"""The pass vocabulary: names, the text form a model writes, parsing, and replay as an `opt -passes` pipeline.

The vocabulary is every optimization pass llvmlite 0.47 (LLVM 20) adds to its new-pass-manager
`ModulePassManager`, named as `opt -passes` names them, plus the meta flags -O0..-Oz (at most one per list,
applied first: they build LLVM's default pipeline for that level). Left out, with the reason:

- printers and viewers (cfg/dom/post-dom printers and viewers, dot-callgraph, module-debuginfo): output only;
- verifiers and checkers (verify, lint, aa-eval): analyses that do not transform;
- internalize: changes what other modules can link against;
- lower-atomic (atomics become plain memory operations) and lowerinvoke (invokes become calls, dropping
  exception handlers): correct only for single-threaded / exception-free programs;
- refprune: Numba's reference-count pass, not part of LLVM.

Text form: tokens separated by one space, an optional meta flag first, e.g. `-Oz instcombine simplifycfg`
(`format_pass_list`). A model writes that text followed by `PASS_LIST_END` (a newline); `PASS_LIST_REGEX`
is that grammar, for at least one token. The parser ignores surrounding whitespace, so it reads model output
as is, and takes the empty string as the empty list (no passes).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class PassLevel(StrEnum):
    """Where a pass runs, which decides how `opt -passes` must nest it to match llvmlite's adaptors."""

    MODULE = "module"
    CGSCC = "cgscc"
    FUNCTION = "function"
    LOOP = "loop"


@dataclass(frozen=True)
class PassSpec:
    name: str  # the `opt -passes` name
    adder: str  # the llvmlite ModulePassManager method that appends it
    level: PassLevel
    opt_name: str | None = None  # when `opt` needs parameters to match what llvmlite builds


_M, _C, _F, _L = PassLevel.MODULE, PassLevel.CGSCC, PassLevel.FUNCTION, PassLevel.LOOP

PASS_SPECS: tuple[PassSpec, ...] = (
    # module passes
    PassSpec("always-inline", "add_always_inliner_pass", _M),
    PassSpec("constmerge", "add_constant_merge_pass", _M),
    PassSpec("deadargelim", "add_dead_arg_elimination_pass", _M),
    PassSpec("globaldce", "add_global_dead_code_eliminate_pass", _M),
    PassSpec("globalopt", "add_global_opt_pass", _M),
    PassSpec("ipsccp", "add_ipsccp_pass", _M),
    PassSpec("loop-extract", "add_loop_extract_pass", _M),
    PassSpec("mergefunc", "add_merge_functions_pass", _M),
    PassSpec("partial-inliner", "add_partial_inliner_pass", _M),
    PassSpec("rpo-function-attrs", "add_rpo_function_attrs_pass", _M),
    PassSpec("strip", "add_strip_symbols_pass", _M),
    PassSpec("strip-dead-debug-info", "add_strip_dead_debug_info_pass", _M),
    PassSpec("strip-dead-prototypes", "add_strip_dead_prototype_pass", _M),
    PassSpec("strip-debug-declare", "add_strip_debug_declare_pass", _M),
    PassSpec("strip-nondebug", "add_strip_non_debug_symbols_pass", _M),
    # call-graph SCC passes
    PassSpec("argpromotion", "add_argument_promotion_pass", _C),
    PassSpec("function-attrs", "add_post_order_function_attributes_pass", _C),
    # function passes
    PassSpec("adce", "add_aggressive_dce_pass", _F),
    PassSpec("aggressive-instcombine", "add_aggressive_instcombine_pass", _F),
    PassSpec("break-crit-edges", "add_break_critical_edges_pass", _F),
    PassSpec("dce", "add_dead_code_elimination_pass", _F),
    PassSpec("dse", "add_dead_store_elimination_pass", _F),
    PassSpec("instcombine", "add_instruction_combine_pass", _F),
    PassSpec("instnamer", "add_instruction_namer_pass", _F),
    PassSpec("jump-threading", "add_jump_threading_pass", _F),
    PassSpec("lcssa", "add_lcssa_pass", _F),
    PassSpec("loop-simplify", "add_loop_simplify_pass", _F),
    PassSpec("loop-unroll", "add_loop_unroll_pass", _F),
    PassSpec("lower-switch", "add_lower_switch_pass", _F),
    PassSpec("memcpyopt", "add_mem_copy_opt_pass", _F),
    PassSpec("mergereturn", "add_unify_function_exit_nodes_pass", _F),
    # newgvn is left out: it miscompiles real code (pcre2 10.42's pcre2_study.c after `instcombine
    # jump-threading newgvn dse newgvn sroa` loops forever in its own tests, with LLVM 19's opt as with
    # llvmlite's LLVM 20; docs/bench/clients.md). LLVM's default pipelines leave NewGVN out too.
    PassSpec("reassociate", "add_reassociate_pass", _F),
    PassSpec("reg2mem", "add_register_to_memory_pass", _F),
    PassSpec("sccp", "add_sccp_pass", _F),
    PassSpec("simplifycfg", "add_simplify_cfg_pass", _F),
    PassSpec("sink", "add_sinking_pass", _F),
    PassSpec("sroa", "add_sroa_pass", _F, opt_name="sroa<preserve-cfg>"),
    PassSpec("tailcallelim", "add_tail_call_elimination_pass", _F),
    # loop passes (llvmlite wraps each in its own function-to-loop adaptor, without MemorySSA)
    PassSpec("loop-deletion", "add_loop_deletion_pass", _L),
    PassSpec("loop-reduce", "add_loop_strength_reduce_pass", _L),
    PassSpec("loop-rotate", "add_loop_rotate_pass", _L),
    PassSpec("loop-unroll-and-jam", "add_loop_unroll_and_jam_pass", _L),
)
_SPEC_BY_NAME = {spec.name: spec for spec in PASS_SPECS}

PASS_NAMES: tuple[str, ...] = tuple(spec.name for spec in PASS_SPECS)
META_FLAGS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Oz")
# (speed level, size level) of PipelineTuningOptions for each meta flag.
META_FLAG_LEVELS = {"-O0": (0, 0), "-O1": (1, 0), "-O2": (2, 0), "-O3": (3, 0), "-Os": (2, 1), "-Oz": (2, 2)}

# Longest list the text form allows after the optional meta flag. Autotuned lists are short (thesis: <= 9
# typical); the bound keeps the grammar's automaton small.
MAX_PASSES = 24
SEPARATOR = " "


def _alternatives(names: Iterable[str]) -> str:
    # Longest first so that a prefix (e.g. `loop-unroll`) never shadows a longer name in a leftmost match.
    return "(" + "|".join(re.escape(name) for name in sorted(names, key=lambda n: (-len(n), n))) + ")"


_PASS_RE = _alternatives(PASS_NAMES)
_META_RE = _alternatives(META_FLAGS)
# The model ends its list with a newline. outlines_core 0.2.14's Index drops every transition out of an
# accepting state except EOS, so with an unterminated grammar a model could write only one pass; with the
# newline the only accepting state is the end. No lookarounds or backreferences (outlines_core builds a DFA).
PASS_LIST_END = "\n"
_LISTS_RE = f"{_META_RE}( {_PASS_RE}){{0,{MAX_PASSES}}}|{_PASS_RE}( {_PASS_RE}){{0,{MAX_PASSES - 1}}}"
PASS_LIST_REGEX: str = f"({_LISTS_RE}){PASS_LIST_END}"


class PassListError(ValueError):
    """A pass list that is not in the vocabulary or breaks the grammar (e.g. a meta flag not first)."""


def validate_pass_list(pass_list: Sequence[str]) -> tuple[str, ...]:
    """Check names, meta-flag placement and length; return the list as a tuple."""
    pass_list = tuple(pass_list)
    for position, name in enumerate(pass_list):
        if not isinstance(name, str):
            raise PassListError(f"pass names are strings, got {name!r} at position {position + 1}")
        if name in META_FLAGS:
            if position != 0:
                raise PassListError(f"meta flag {name} must come first (found at position {position + 1})")
        elif name not in _SPEC_BY_NAME:
            raise PassListError(_unknown_pass_message(name))
    passes = len(pass_list) - (1 if pass_list and pass_list[0] in META_FLAGS else 0)
    if passes > MAX_PASSES:
        raise PassListError(f"pass list has {passes} passes, more than the limit of {MAX_PASSES}")
    return pass_list


def _unknown_pass_message(name: str) -> str:
    close = difflib.get_close_matches(name, PASS_NAMES + META_FLAGS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown pass {name!r}{hint}; see optserve.compiler.passes.PASS_NAMES"


def parse_pass_list(text: str) -> tuple[str, ...]:
    """Parse the text form (whitespace-separated tokens, optional meta flag first) into a pass list."""
    return validate_pass_list(text.split())


def format_pass_list(pass_list: Sequence[str]) -> str:
    """The canonical text form of a pass list; `parse_pass_list(format_pass_list(p)) == tuple(p)`."""
    return SEPARATOR.join(validate_pass_list(pass_list))


def pass_spec(name: str) -> PassSpec:
    try:
        return _SPEC_BY_NAME[name]
    except KeyError:
        raise PassListError(_unknown_pass_message(name)) from None


def to_opt_pipeline(pass_list: Sequence[str]) -> str:
    """The `opt -passes=...` string that replays `pass_list` the way llvmlite runs it.

    Each pass gets its own adaptor, as llvmlite's `add_*_pass` methods build them: function passes as
    `function(x)`, loop passes as `function(loop(x))`, call-graph passes as `cgscc(x)`; a meta flag is
    `default<Oz>` etc. Meta flags run with the vectorizer settings `opt` uses (loop and SLP vectorization
    at -O2, -O3 and -Os only).

    LLVM 19 vs 20: `opt-19` (Debian llvm-19) accepts every name here, and replays random lists on clang-19
    IR to the same instruction count as llvmlite's LLVM 20.1.8, except where LLVM 20's -O2/-O3/-Os
    pipelines changed (tests/compiler checks lists where they agree). The other direction fails: IR
    *printed* by LLVM 20 can use syntax LLVM 19 cannot read (e.g. `icmp samesign`), so a client replays a
    list on its own unoptimized IR, not on optserve's output.
    """
    parts = []
    for name in validate_pass_list(pass_list):
        if name in META_FLAGS:
            parts.append(f"default<{name[1:]}>")
            continue
        spec = _SPEC_BY_NAME[name]
        opt_name = spec.opt_name or spec.name
        parts.append(
            {
                PassLevel.MODULE: opt_name,
                PassLevel.CGSCC: f"cgscc({opt_name})",
                PassLevel.FUNCTION: f"function({opt_name})",
                PassLevel.LOOP: f"function(loop({opt_name}))",
            }[spec.level]
        )
    return ",".join(parts)
