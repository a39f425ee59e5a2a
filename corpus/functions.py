"""From one source file to corpus examples: compile, split per function, normalize, apply the drop rules.

`examples_of_file` is the unit of work of the build (it runs in a worker process) and returns a plain JSON
record, so the build can journal it and resume.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from optserve.compiler.cache import ir_digest
from optserve.compiler.ir import IRError, instruction_count, normalize_ir, split_functions
from optserve.corpus.compile import CompileError, source_ir
from optserve.corpus.sources import SourceFile


@dataclass(frozen=True)
class DropRules:
    """Which functions are kept: not trivial, and short enough for the model's context."""

    min_instructions: int = 4  # functions with <= 3 instructions are trivial
    max_bytes: int = 8192  # normalized IR; ~2 characters per token -> ~4k tokens of prompt


def ir_hash(normalized_ir: str) -> str:
    """The example id: SHA-256 of the normalized IR (dedup key and leakage-manifest entry), the digest the
    service and the tuning store use too."""
    return ir_digest(normalized_ir)


def source_key(source: str, path: str) -> str:
    return f"{source}:{path}"


def function_examples(
    functions: list[tuple[str, str]], rules: DropRules
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Normalized functions that pass the drop rules ([{id, function, instructions, bytes, ir}]), and drops.

    Drops by reason: invalid (does not normalize), trivial, too_long, duplicate (same normalized IR).
    """
    examples: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    seen: set[str] = set()
    for name, function_ir in functions:
        try:
            normalized = normalize_ir(function_ir)
            count = instruction_count(normalized)
        except IRError:
            dropped["invalid"] += 1
            continue
        size = len(normalized.encode())
        if count < rules.min_instructions:
            dropped["trivial"] += 1
        elif size > rules.max_bytes:
            dropped["too_long"] += 1
        elif (digest := ir_hash(normalized)) in seen:
            dropped["duplicate"] += 1
        else:
            seen.add(digest)
            examples.append(
                {"id": digest, "function": name, "instructions": count, "bytes": size, "ir": normalized}
            )
    return examples, dropped


def examples_of_file(job: tuple[SourceFile, DropRules, float]) -> dict[str, Any]:
    """Examples of one source file, with counts of what was dropped and why.

    Returns {"key", "status" (ok | compile_error | parse_error), "error", "dropped": {reason: n},
    "functions": n, "examples": [...], "seconds" (wall time, files that compiled)}; an example is
    {id, source, package, file, function, licence, instructions, bytes, ir}.
    """
    source_file, rules, timeout_s = job
    started = time.perf_counter()
    record: dict[str, Any] = {
        "key": source_key(source_file.source, source_file.path),
        "status": "ok",
        "error": "",
        "functions": 0,
        "dropped": {},
        "examples": [],
    }
    try:
        module_ir = source_ir(source_file, timeout_s)
    except (CompileError, OSError) as err:
        return {**record, "status": "compile_error", "error": str(err)}
    try:
        functions = split_functions(module_ir)
    except IRError as err:
        return {**record, "status": "parse_error", "error": str(err)[:300]}

    examples, dropped = function_examples(functions, rules)
    base = {"source": source_file.source, "package": source_file.package, "file": source_file.path,
            "licence": source_file.licence}  # fmt: skip
    record["examples"] = [{**base, **example} for example in examples]
    record["functions"] = len(functions)
    record["dropped"] = dict(dropped)
    record["seconds"] = round(time.perf_counter() - started, 4)
    return record
