"""Which object a unit gets: clang's or the service's, the smaller by `.text` bytes, unless the service's
cannot be trusted (not ELF, debug info missing, made with a pass known to miscompile, or refused by
object_trust.py's checks).
"""

from __future__ import annotations

import sys
from collections import namedtuple
from pathlib import Path

from optserve.clients import elf
from optserve.clients.command_line import CompileJob
from optserve.clients.settings import OptccSettings

# Sections whose presence in clang's object the chosen object must match (a -g build keeps its debug info).
DEBUG_SECTIONS = frozenset({".debug_info", ".debug_line"})
# Passes whose objects optcc never uses. NewGVN (off in LLVM's own pipelines for its open correctness bugs)
# miscompiles pcre2 10.42: pcre2_study.c after `instcombine jump-threading newgvn dse newgvn sroa` (a coreset
# list the service often picks) loops forever in pcre2test, with LLVM 19's opt as with the service's LLVM 20
# (docs/bench/clients.md). The fix belongs in the pass vocabulary (compiler/passes.py); until then, clang's
# object is kept for such units.
UNSAFE_PASSES = frozenset({"newgvn"})
# Why a unit keeps clang's object when the service's fails object_trust.py's checks (the log's
# `kept_clang_because` starts so; its `untrusted` is true then).
UNTRUSTED = "the service's object failed optcc's checks"


class Choice(namedtuple("Choice", "winner object_code clang_text service_text reason")):
    """Which object a unit gets: `winner` "service" or "clang", and the `.text` bytes of both (`service_text`
    None when unknown); `reason`: why clang's object was kept although the service's was smaller, else ""."""

    __slots__ = ()


def clang_kept(clang_code: bytes, response) -> Choice:
    """Clang's object, the service having found nothing smaller; its cheapest candidate's size for the log
    (objective text_size: `.text` bytes as measured by the service)."""
    measured = [c.cost for c in response.candidates if (c.passes or c.function_passes) and c.cost >= 0]
    clang_text = elf.code_bytes(elf.sections(clang_code))
    return Choice("clang", clang_code, clang_text, min(measured, default=None), "")


def choose(clang, service_code: bytes, passes=()) -> Choice:
    """The smaller object by `.text` bytes; clang's on a tie, or when the service's cannot be trusted (not
    ELF, debug info missing, or made by a pass list with an UNSAFE_PASSES pass). `clang`: clang's object, or
    the record of it (baseline_memo.Baseline; a Choice of clang's then has no object_code)."""
    if isinstance(clang, bytes):
        clang_code, clang_sections = clang, elf.sections(clang)
        clang_text, clang_names = elf.code_bytes(clang_sections), {s.name for s in clang_sections}
    else:
        clang_code, clang_text, clang_names = None, clang.text, clang.section_names
    try:
        service_sections = elf.sections(service_code)
    except elf.NotElf as err:
        return Choice("clang", clang_code, clang_text, None, f"the service's object: {err}")
    service_text = elf.code_bytes(service_sections)
    if service_text >= clang_text:
        return Choice("clang", clang_code, clang_text, service_text, "")
    unsafe = UNSAFE_PASSES.intersection(passes)
    if unsafe:
        return Choice("clang", clang_code, clang_text, service_text, f"its list uses {min(unsafe)} (unsafe)")
    missing = DEBUG_SECTIONS & clang_names - {s.name for s in service_sections}
    if missing:
        return Choice(
            "clang", clang_code, clang_text, service_text, f"the service's object lacks {min(missing)}"
        )
    return Choice("service", service_code, clang_text, service_text, "")


def checked(settings: OptccSettings, job: CompileJob, choice: Choice, clang_code: bytes, bitcode: Path):
    """The service's chosen object if it passes object_trust's checks against clang's object of the unit and
    the bitcode sent; else clang's object, the reason said on stderr and logged (`--stats`: untrusted)."""
    from optserve.clients import object_trust

    refusal = object_trust.refusal(choice.object_code, clang_code, bitcode, settings.clang)
    if not refusal:
        return choice
    reason = f"{UNTRUSTED}: {refusal}"
    if not settings.verbose:  # the verbose line of the unit says it
        print(f"optcc: {job.source}: clang's object kept: {reason}", file=sys.stderr)
    return Choice("clang", clang_code, choice.clang_text, choice.service_text, reason)


def all_passes(candidate) -> set[str]:
    """Every pass the candidate's object was made with (a per_function candidate: each function's)."""
    return set(candidate.passes).union(*(p.split() for p in candidate.function_passes.values()))
