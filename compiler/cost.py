"""Cost functions for the pass-ordering objective: IR instruction count or object-file .text size.

llvmlite is imported where LLVM is called (compiler/ir.py says why).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optserve.compiler.ir import module_instruction_count, parse_module
from optserve.compiler.target import target_machine
from optserve.objectives import Objective

if TYPE_CHECKING:
    import llvmlite.binding as llvm


def measure(ir: str, objective: Objective | str) -> int:
    """The cost of IR text under `objective` (IRError if the IR is invalid)."""
    return module_cost(parse_module(ir), Objective(objective))


def module_cost(module: llvm.ModuleRef, objective: Objective) -> int:
    if objective is Objective.INSTRUCTION_COUNT:
        return module_instruction_count(module)
    return text_size(object_code(module))


def object_code(module: llvm.ModuleRef) -> bytes:
    """The relocatable object file for the module's target triple (host if none).

    Codegen changes the module's IR in place: measure or print the IR before calling this.
    """
    return target_machine(module.triple).emit_object(module)


def text_size(object_file: bytes) -> int:
    """Bytes in the object file's code sections (`.text`, and `.text.*` where functions get their own)."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    return sum(
        section.size()
        for section in llvm.ObjectFileRef.from_data(object_file).sections()
        if section.is_text()
    )
