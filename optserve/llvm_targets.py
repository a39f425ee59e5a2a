"""LLVM's host target in this process, set up once: what the compiler (compiler/target.py: pass pipelines,
object code) and the loop-nest compiler (kernels/jit.py: MCJIT) need before they build a target machine.

Only the host's target: the compiler refuses modules for another architecture (`compiler.ir` checks the
triple), and the loop-nest compiler JITs for the host. llvmlite is imported inside the function, so a module
that imports this one loads no LLVM until it asks for a target (the service's ingress loads none:
tests/contracts/test_ingress_loads_no_llvm.py).
"""

from __future__ import annotations

import functools


@functools.cache
def initialize_native_target() -> None:
    """Register the host's target, its asm printer (object code) and its asm parser, once per process."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # The object streamer assembles inline asm (`__asm__("cpuid")`, `module asm`) with the target's asm
    # parser; without one LLVM aborts the process ("Inline asm not supported by this streamer"), as on
    # xz-utils' crc64_fast.c and nettle's nettle-benchmark.c.
    llvm.initialize_native_asmparser()
