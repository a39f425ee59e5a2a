"""Target machines for a module's triple: what pass pipelines (TargetTransformInfo) and codegen need.

Modules without a triple use the host's. A target machine is built per use (tens of microseconds, far less
than a compilation), so threads never share one. llvmlite is imported where LLVM is called (compiler/ir.py
says why), and the targets are initialized once per process, on the first target machine.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from optserve.compiler.ir import IRError

if TYPE_CHECKING:
    import llvmlite.binding as llvm


@functools.cache
def _initialize_targets() -> None:
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # The object streamer assembles inline asm (`__asm__("cpuid")`, `module asm`) with the target's asm
    # parser; without one LLVM aborts the process ("Inline asm not supported by this streamer"), as on
    # xz-utils' crc64_fast.c and nettle's nettle-benchmark.c. Only the host's is needed: other targets are
    # refused (ir._check_target).
    llvm.initialize_native_asmparser()


def target_machine(triple: str) -> llvm.TargetMachine:
    """A target machine for `triple` ('' = host), position-independent, default codegen optimization."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    _initialize_targets()
    triple = triple or llvm.get_process_triple()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise IRError(f"unsupported target triple {triple!r}: {' '.join(str(err).split())}") from None
    return target.create_target_machine(opt=2, reloc="pic", codemodel="default")
