"""The objectives a pass list is chosen for: the proto's `Objective` enum in lower case, one list for the
service, the engine, the compiler (compiler/cost.py measures them), the training wing and the thin clients
(optcc checks OPTCC_OBJECTIVE against it).

Standard library only: optcc imports it on every command it takes over, the client install has no pydantic
and no LLVM.
"""

from __future__ import annotations

from enum import StrEnum


class Objective(StrEnum):
    """What the autotuner and the service minimize."""

    INSTRUCTION_COUNT = "instruction_count"  # instructions in all function bodies of the IR
    TEXT_SIZE = "text_size"  # bytes of .text in the object file for the module's target triple


# The names as plain strings, in the enum's order: argparse choices and error messages show these.
OBJECTIVE_NAMES = tuple(objective.value for objective in Objective)
