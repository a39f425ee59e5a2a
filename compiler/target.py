"""Target machines for a module's triple: what pass pipelines (TargetTransformInfo) and codegen need.

Modules without a triple use the host's. A target machine is built per use (tens of microseconds, far less
than a compilation), so threads never share one. llvmlite is imported where LLVM is called (compiler/ir.py
says why), and the host's target is initialized once per process, on the first target machine
(optserve/llvm_targets.py, shared with the loop-nest compiler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optserve.compiler.ir import IRError
from optserve.llvm_targets import initialize_native_target

if TYPE_CHECKING:
    import llvmlite.binding as llvm


def target_machine(triple: str) -> llvm.TargetMachine:
    """A target machine for `triple` ('' = host), position-independent, default codegen optimization."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    initialize_native_target()
    triple = triple or llvm.get_process_triple()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise IRError(f"unsupported target triple {triple!r}: {' '.join(str(err).split())}") from None
    return target.create_target_machine(opt=2, reloc="pic", codemodel="default")
