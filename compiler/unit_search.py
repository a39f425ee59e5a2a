"""Choose a pass list per function of a whole unit: measure candidates on each function module, keep the best.

Step by step (docs/bench/function_lists.md measured the variants):
  1. split the unit (`function_lists.split_unit`: a function with the static helpers only it calls);
  2. compile every candidate list on every function module, each alone, through a `CandidateCompiler`
     (crash-isolated workers);
  3. per function, the cheapest list (ties: the earlier candidate, so -Oz first when it is listed first);
  4. the chosen lists applied and linked as one compiler job (`FunctionLists`), measured on the whole unit.
The caller keeps the whole unit's -Oz when that is smaller (the floor).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from optserve.compiler.cost import Objective
from optserve.compiler.function_lists import FunctionLists, UnitParts, split_unit
from optserve.compiler.pipeline import Evaluation
from optserve.compiler.workers import CandidateCompiler


@dataclass(frozen=True)
class FunctionCosts:
    """Every candidate's cost on every function module (None: it failed there)."""

    candidates: tuple[tuple[str, ...], ...]
    costs: dict[str, list[int | None]]  # function -> cost per candidate, in candidate order
    seconds: dict[str, list[float]]  # function -> compile seconds per candidate

    def choose(self, count: int | None = None) -> FunctionLists:
        """Per function the cheapest of the first `count` candidates (all when None); the first on a tie."""
        limit = len(self.candidates) if count is None else count
        chosen = {}
        for name, costs in self.costs.items():
            measured = [(cost, index) for index, cost in enumerate(costs[:limit]) if cost is not None]
            if measured:
                chosen[name] = self.candidates[min(measured)[1]]
        return FunctionLists.of(chosen, default=self.candidates[0])

    def compile_seconds(self, count: int | None = None) -> float:
        """Seconds compiling the first `count` candidates on every function (one core, one after another)."""
        limit = len(self.candidates) if count is None else count
        return sum(sum(seconds[:limit]) for seconds in self.seconds.values())


async def measure_functions(
    parts: UnitParts,
    candidates: Sequence[Sequence[str]],
    objective: Objective | str,
    compiler: CandidateCompiler,
    concurrency: int = 2,
) -> FunctionCosts:
    """Compile every candidate on every function module of `parts`, at most `concurrency` modules at a
    time (a unit has up to hundreds of functions: the compiler's queue must not overflow).

    If one module's compile raises (the compiler is gone), the others are cancelled before it propagates:
    none is left waiting to compile for a request that has already failed."""
    candidates = tuple(tuple(p) for p in candidates)
    names = list(parts.functions)
    slots = asyncio.Semaphore(concurrency)

    async def measure(name: str) -> list[Evaluation]:
        async with slots:
            return await compiler.evaluate_async(parts.functions[name], candidates, objective)

    tasks = [asyncio.ensure_future(measure(name)) for name in names]
    try:
        results: list[list[Evaluation]] = await asyncio.gather(*tasks)
    except BaseException:  # gather cancels the rest only when it is cancelled itself, not when one raises
        for task in tasks:
            task.cancel()
        raise
    costs = {
        name: [e.cost if e.ok else None for e in evals] for name, evals in zip(names, results, strict=True)
    }
    seconds = {name: [e.seconds for e in evals] for name, evals in zip(names, results, strict=True)}
    return FunctionCosts(candidates, costs, seconds)


async def search_function_lists(
    ir: str,
    candidates: Sequence[Sequence[str]],
    objective: Objective | str,
    compiler: CandidateCompiler,
    want_ir: bool = False,
    want_object: bool = False,
    concurrency: int = 2,
) -> tuple[FunctionLists, Evaluation]:
    """The per-function choice among `candidates` and its Evaluation on the whole unit.

    Raises IRError when the unit cannot be split (then the unit has only whole-unit candidates).
    """
    parts = await asyncio.to_thread(split_unit, ir)
    measured = await measure_functions(parts, candidates, objective, compiler, concurrency)
    chosen = measured.choose()
    (unit,) = await compiler.evaluate_async(ir, [chosen], objective, want_ir, want_object)
    return chosen, unit
