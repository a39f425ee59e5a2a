"""Model candidates for a module longer than the model's context: lists its largest functions ask for.

optcc sends whole translation units, and most real ones are longer than the model's context
(docs/bench/corpus_real.md). The model was trained on one function per prompt, so it reads the unit's largest
functions one by one (concurrently), and every list it proposes is compiled for the whole unit, beside the
coreset's lists and -Oz. A list stays one list per unit, so inter-procedural passes (inlining, dead globals)
still see the whole unit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from optserve.compiler.interface import CandidateCompiler, WorkerCrashedError
from optserve.compiler.ir import IRError, split_functions
from optserve.deadline import BACKEND_GRACE_S, Deadline
from optserve.engine.interface import Engine, Generation, PromptTooLongError, SamplingOptions


@dataclass(frozen=True)
class UnitLists:
    lists: list[tuple[tuple[str, ...], float]]  # (pass list, logprob), round-robin over the functions read
    functions_read: list[str]  # names, largest first
    functions_too_long: int  # largest functions skipped because the model cannot read them either


async def unit_lists(
    ir: str,
    engine: Engine,
    compiler: CandidateCompiler,
    options: SamplingOptions,
    functions: int,
    deadline: Deadline,
) -> UnitLists:
    """Lists for the `functions` largest functions of `ir` the model can read (largest IR first).

    The two backends are the Optimizer's, passed down: the `compiler` splits the unit where LLVM may crash (a
    compiler worker: `compiler.ir.split_functions`), the `engine` reads each function (a function too long
    for it too raises PromptTooLongError, and is skipped). Functions are tried in batches of `functions`,
    largest first, until that many were read or three batches were tried: a unit whose largest functions
    are all too long still gets lists from smaller ones. A split or a generation cut by `deadline` raises
    its StoppedError (`optserve.deadline`).
    """

    async def generate(function_ir: str) -> Generation:
        return await deadline.extended(BACKEND_GRACE_S).within(
            engine.generate(function_ir, options, None), "sampling"
        )

    try:
        parts = await compiler.run_async(split_functions, ir, deadline=deadline)
    except (IRError, WorkerCrashedError):  # a unit LLVM cannot split: lists from the coreset and -Oz only
        parts = []
    parts.sort(key=lambda part: (-len(part[1]), part[0]))  # by size; the name breaks ties (determinism)
    read: list[tuple[str, Generation]] = []
    too_long = 0
    for start in range(0, min(len(parts), 3 * functions), functions):
        batch = parts[start : start + functions - len(read)]
        results = await asyncio.gather(*(generate(text) for _, text in batch), return_exceptions=True)
        for (name, _), result in zip(batch, results, strict=True):
            if isinstance(result, PromptTooLongError):
                too_long += 1
            elif isinstance(result, BaseException):
                raise result
            else:
                read.append((name, result))
        if len(read) >= functions:
            break
    lists = _round_robin([generation for _, generation in read], max(options.samples, len(read)))
    return UnitLists(lists, [name for name, _ in read], too_long)


def _round_robin(generations: list[Generation], limit: int) -> list[tuple[tuple[str, ...], float]]:
    """Each function's first list, then each one's second, ...: unique lists, at most `limit`."""
    lists: list[tuple[tuple[str, ...], float]] = []
    seen: set[tuple[str, ...]] = set()
    depth = max((len(g.candidates) for g in generations), default=0)
    for rank in range(depth):
        for generation in generations:
            if rank < len(generation.candidates) and len(lists) < limit:
                candidate = generation.candidates[rank]
                if candidate.pass_list not in seen:
                    seen.add(candidate.pass_list)
                    lists.append((candidate.pass_list, candidate.logprob))
    return lists
