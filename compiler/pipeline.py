"""Apply a pass list to IR and measure the result: the pure core of candidate evaluation.

These functions run LLVM in the calling process. LLVM can abort the process on some inputs and pass
combinations, so services and search run them through `optserve.compiler.workers.CompilerPool`.
llvmlite is imported where LLVM is called (compiler/ir.py says why). `evaluate` answers with the compiler
seam's `Evaluation` (compiler/interface.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from optserve.compiler.cost import Objective, module_cost, object_code, text_size
from optserve.compiler.interface import Evaluation
from optserve.compiler.ir import IRError, compile_input, module_instruction_count, parse_module
from optserve.compiler.passes import (
    META_FLAG_LEVELS,
    META_FLAGS,
    PassListError,
    pass_spec,
    validate_pass_list,
)
from optserve.compiler.target import target_machine

if TYPE_CHECKING:
    import llvmlite.binding as llvm

OZ = ("-Oz",)


def optimize_module(module: llvm.ModuleRef, pass_list: Sequence[str]) -> None:
    """Run `pass_list` on `module` in place: the meta flag's default pipeline first, then each pass."""
    import llvmlite.binding as llvm  # here, not at the top: see the module's docstring

    pass_list = validate_pass_list(pass_list)
    machine = target_machine(module.triple)
    if pass_list and pass_list[0] in META_FLAGS:
        speed, size = META_FLAG_LEVELS[pass_list[0]]
        options = llvm.create_pipeline_tuning_options(speed, size)
        # As `opt -passes=default<Ox>` (and clang) set them: vectorizers only at -O2, -O3 and -Os.
        options.loop_vectorization = options.slp_vectorization = speed > 1 and size < 2
        # A PassBuilder registers per-run instrumentation, so each run gets a fresh one.
        builder = llvm.create_pass_builder(machine, options)
        manager = builder.getModulePassManager()
        pass_list = pass_list[1:]
    else:
        builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options())
        manager = llvm.create_new_module_pass_manager()
    for name in pass_list:
        getattr(manager, pass_spec(name).adder)()
    manager.run(module, builder)


def optimize(ir: str, pass_list: Sequence[str]) -> str:
    """The IR after applying `pass_list` (meta flag first, then the passes in order)."""
    module = parse_module(ir)
    optimize_module(module, pass_list)
    return str(module)


def evaluate(
    ir: str | bytes,
    pass_list: Sequence[str],
    objective: Objective | str,
    want_ir: bool = False,
    want_object: bool = False,
) -> Evaluation:
    """Optimize and measure one candidate; bad IR or pass lists give an error Evaluation, not an exception.
    `ir`: `parse_ir`'s text, or the unit's bytes as a client sent them (`compile_input`)."""
    started = time.perf_counter()
    pass_list = tuple(pass_list)
    objective = Objective(objective)
    try:
        module = compile_input(ir)
        optimize_module(module, pass_list)
        module.verify()
        # Read the IR (and count its instructions) before emitting code: codegen rewrites the module in place
        # (e.g. CodeGenPrepare).
        optimized_ir = str(module) if want_ir else None
        instructions = module_instruction_count(module) if objective is Objective.INSTRUCTION_COUNT else None
        code = object_code(module) if want_object or objective is Objective.TEXT_SIZE else None
        cost = text_size(code) if objective is Objective.TEXT_SIZE else instructions
        return Evaluation(
            pass_list,
            cost,
            None,
            time.perf_counter() - started,
            optimized_ir=optimized_ir,
            object_code=code if want_object else None,
        )
    except (IRError, PassListError, RuntimeError) as err:
        return Evaluation(pass_list, None, f"{type(err).__name__}: {err}", time.perf_counter() - started)


def oz_cost(ir: str, objective: Objective | str) -> int:
    """Cost after LLVM's -Oz pipeline: the baseline every candidate must beat."""
    module = parse_module(ir)
    optimize_module(module, OZ)
    return module_cost(module, Objective(objective))
