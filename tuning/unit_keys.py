"""The tuning store's keys of one unit: the whole unit's hash and one hash per function module.

A function's key is the hash of its function module as `compiler.function_lists.split_unit` builds it (the
function, the static helpers only it calls, declarations of what it references), normalized as the model
reads IR (comments, debug metadata and attribute groups dropped; `compiler.ir.normalized_lines`, on the
text LLVM printed, so no key costs a parse beyond the split's). An edit of one function changes that
function's module and the unit's hash, not the other functions' modules: their stored lists still apply.
A `-g` build and a plain one of the same source share their keys.

Pure functions of IR text (LLVM in the calling process: the service runs them in a compiler worker,
`optserve tune` in its worker tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

from optserve.compiler.function_lists import UnitParts, defined_function_count, split_unit
from optserve.compiler.ir import IRError, Stop, normalized_lines, parse_ir
from optserve.tuning.keys import ir_hash


@dataclass(frozen=True)
class UnitKeys:
    unit_hash: str  # the whole unit, normalized
    function_hashes: dict[str, str]  # function name -> its normalized function module's hash
    parts: UnitParts | None  # the split (None: one function or none, or a unit split_unit refuses)
    split_error: str = ""  # why there is no split, when split_unit refused the unit


def unit_hash(ir: str) -> str:
    """The whole unit's key (no parse: `ir` as LLVM printed it, `compiler.ir.parse_ir`'s text)."""
    return ir_hash(normalized_lines(ir))


def read_unit(data: str | bytes, max_bytes: int) -> tuple[str, str]:
    """`compiler.ir.parse_ir`'s text of `data` and its `unit_hash`, in one job: the service's intake with a
    tuning store, so that the ingress (which loads no LLVM and holds the text only to pass it on) does not
    normalize and hash the whole unit again, nor the split of its functions' keys (`unit_keys`' `whole`)."""
    ir = parse_ir(data, max_bytes)
    return ir, unit_hash(ir)


def unit_keys(ir: str, max_functions: int, stop: Stop | None = None, whole: str | None = None) -> UnitKeys:
    """The keys of `ir` (a unit as LLVM printed it: `compiler.ir.parse_ir`'s text). Units of more than
    `max_functions` defined functions or that `split_unit` refuses (aliases, ifuncs) get only the unit's
    key; `stop()` ends the split early (StoppedError), as the service's deadline does. `whole`: the unit's
    key when the caller has it (`unit_hash(ir)`, as `read_unit` gives it), not computed again."""
    whole = whole or unit_hash(ir)
    if defined_function_count(ir) < 2 or defined_function_count(ir) > max_functions:
        return UnitKeys(whole, {}, None)
    try:
        parts = split_unit(ir, stop)
    except IRError as err:
        return UnitKeys(whole, {}, None, str(err))
    hashes = {name: ir_hash(normalized_lines(module)) for name, module in parts.functions.items()}
    return UnitKeys(whole, hashes, parts)
