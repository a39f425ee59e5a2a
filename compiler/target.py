"""Target machines for a module's triple: what pass pipelines (TargetTransformInfo) and codegen need.

Modules without a triple use the host's. A target machine is built per use (tens of microseconds, far less
than a compilation), so threads never share one.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from optserve.compiler.ir import IRError


@functools.cache
def _initialize_targets() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # Codegen parses inline asm (`asm volatile("cpuid" ...)`) into the object; without the host's asm parser
    # LLVM aborts the process ("Inline asm not supported by this streamer"): 8 of 995 real test units.
    llvm.initialize_native_asmparser()


def target_machine(triple: str) -> llvm.TargetMachine:
    """A target machine for `triple` ('' = host), position-independent, default codegen optimization."""
    _initialize_targets()
    triple = triple or llvm.get_process_triple()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise IRError(f"unsupported target triple {triple!r}: {' '.join(str(err).split())}") from None
    return target.create_target_machine(opt=2, reloc="pic", codemodel="default")
