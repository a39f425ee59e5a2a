"""The tuning store's keys: which toolchain a list is valid for, and the hash of a function's or unit's IR.

An entry is keyed by (kind, IR hash, objective, target, LLVM version, vocabulary version). The IR hash is that
of the normalized IR of one function (or one whole unit), so an unchanged function keeps its entry when
another function of its unit changes. The LLVM version comes from llvmlite (the LLVM the service compiles
with), and the vocabulary version is a short hash of the served pass names and meta flags: a list written
with passes this install cannot run is never served.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache

from optserve.compiler.passes import MAX_PASSES, META_FLAGS, PASS_NAMES
from optserve.tuning.records import Toolchain


def ir_hash(normalized_ir: str) -> str:
    """SHA-256 (hex) of normalized IR text: the key of a function or unit (the service's IR digest)."""
    from optserve.compiler.cache import (
        ir_digest,
    )  # here: compiler.cache loads LLVM, the store's readers need none

    return ir_digest(normalized_ir)


@cache
def vocabulary_version() -> str:
    """A short stable hash of the served pass vocabulary (pass names, meta flags, the list length bound)."""
    text = json.dumps({"passes": sorted(PASS_NAMES), "meta": list(META_FLAGS), "max_passes": MAX_PASSES})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@cache
def llvm_version() -> str:
    """The version of the LLVM that llvmlite links, e.g. '20.1.8'."""
    import llvmlite.binding  # here: the store's readers (optcc --stats, profiles) need no LLVM

    return ".".join(str(part) for part in llvmlite.binding.llvm_version_info)


def current_toolchain(objective: str, target: str, llvm: str | None = None) -> Toolchain:
    """The toolchain of this install for `objective` and the target triple `target`. `llvm`: the LLVM
    version as a process that compiles reported it (None: this process's llvmlite's, which loads LLVM)."""
    return Toolchain(
        objective=objective,
        target=target,
        llvm_version=llvm or llvm_version(),
        vocabulary=vocabulary_version(),
    )
