"""Choose a pass list per function of a whole unit: measure candidates on each function module, keep the best.

Step by step (docs/bench/function_lists.md measured the variants):
  1. split the unit (`function_lists.split_unit`: a function with the static helpers only it calls);
  2. compile every candidate list on every function module, each alone, through a `CandidateCompiler`
     (crash-isolated workers);
  3. per function, the cheapest list (ties: the earlier candidate, so -Oz first when it is listed first);
  3b. optionally (`refine_functions`) one round of local search per function: its best list with one more
     pass appended (REFINE_PASSES), kept where smaller (docs/bench/unit_lists.md);
  4. the chosen lists applied and linked as one compiler job (`FunctionLists`), measured on the whole unit.
The caller keeps the whole unit's -Oz when that is smaller (the floor).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from optserve.compiler.cost import Objective
from optserve.compiler.function_lists import FunctionLists, UnitParts, split_unit
from optserve.compiler.interface import CandidateCompiler, Evaluation, cut_by_deadline
from optserve.compiler.passes import PassListError, validate_pass_list
from optserve.deadline import Deadline, StoppedError

# Passes appended to a function's best list in one round of local search (chosen before measuring: cheap
# function passes that clean up after a list; on held-out units one round beat 10 more coreset lists).
REFINE_PASSES = (
    "simplifycfg",
    "instcombine",
    "sroa",
    "jump-threading",
    "dse",
    "adce",
    "mergereturn",
    "sink",
    "reassociate",
    "tailcallelim",
)


@dataclass(frozen=True)
class FunctionCosts:
    """Every candidate's cost on every function module (None: it failed there)."""

    candidates: tuple[tuple[str, ...], ...]
    costs: dict[str, list[int | None]]  # function -> cost per candidate, in candidate order
    seconds: dict[str, list[float]]  # function -> compile seconds per candidate

    def choose(self, count: int | None = None) -> FunctionLists:
        """Per function the cheapest of the first `count` candidates (all when None); the first on a tie."""
        chosen = {name: passes for name, (passes, _) in self.best(count).items()}
        return FunctionLists.of(chosen, default=self.candidates[0])

    def best(self, count: int | None = None) -> dict[str, tuple[tuple[str, ...], int]]:
        """Per function the cheapest of the first `count` candidates and its cost (functions where all
        failed are left out)."""
        limit = len(self.candidates) if count is None else count
        chosen = {}
        for name, costs in self.costs.items():
            measured = [(cost, index) for index, cost in enumerate(costs[:limit]) if cost is not None]
            if measured:
                cost, index = min(measured)
                chosen[name] = (self.candidates[index], cost)
        return chosen

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
    deadline: Deadline | None = None,
) -> FunctionCosts:
    """Compile every candidate on every function module of `parts`, at most `concurrency` modules at a
    time (a unit has up to hundreds of functions: the compiler's queue must not overflow).

    If one module's compile raises (the compiler is gone), the others are cancelled before it propagates:
    none is left waiting to compile for a request that has already failed. Every compile carries
    `deadline`; StoppedError if it cut any of them (no per-function choice can be made then)."""
    candidates = tuple(tuple(p) for p in candidates)
    names = list(parts.functions)
    slots = asyncio.Semaphore(concurrency)

    async def measure(name: str) -> list[Evaluation]:
        async with slots:
            evaluations = await compiler.evaluate_async(
                parts.functions[name], candidates, objective, deadline=deadline
            )
        if cut_by_deadline(evaluations):
            raise StoppedError(f"the deadline came while measuring function {name}")
        return evaluations

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


async def refine_functions(
    parts: UnitParts,
    best: dict[str, tuple[tuple[str, ...], int]],
    objective: Objective | str,
    compiler: CandidateCompiler,
    concurrency: int = 2,
    passes: Sequence[str] = REFINE_PASSES,
    deadline: Deadline | None = None,
) -> tuple[dict[str, tuple[tuple[str, ...], int]], float]:
    """One round of local search per function: its best list (`FunctionCosts.best`) with each of `passes`
    appended, measured on its module; the cheapest kept where it beats the best (a tie keeps the shorter).
    Returns the new best per function and the compile seconds it took (one core, one after another).
    StoppedError if `deadline` cut any compile (as `measure_functions`)."""
    slots = asyncio.Semaphore(concurrency)

    async def refine(name: str) -> tuple[tuple[tuple[str, ...], int], float]:
        chosen, cost = best[name]
        tries = []
        for extra in passes:
            try:
                tries.append(validate_pass_list([*chosen, extra]))
            except PassListError:  # the list is as long as a list may be
                continue
        if not tries:
            return (chosen, cost), 0.0
        async with slots:
            evaluations = await compiler.evaluate_async(
                parts.functions[name], tries, objective, deadline=deadline
            )
        if cut_by_deadline(evaluations):
            raise StoppedError(f"the deadline came while refining function {name}")
        measured = [(e.cost, index) for index, e in enumerate(evaluations) if e.ok and e.cost < cost]
        seconds = sum(e.seconds for e in evaluations)
        if measured:
            cost, index = min(measured)
            chosen = tuple(tries[index])
        return (chosen, cost), seconds

    names = list(best)
    tasks = [asyncio.ensure_future(refine(name)) for name in names]
    try:
        results = await asyncio.gather(*tasks)
    except BaseException:  # as measure_functions: leave no module queued for a request that failed
        for task in tasks:
            task.cancel()
        raise
    refined = {name: result for name, (result, _) in zip(names, results, strict=True)}
    return refined, sum(seconds for _, seconds in results)


async def search_function_lists(
    ir: str,
    candidates: Sequence[Sequence[str]],
    objective: Objective | str,
    compiler: CandidateCompiler,
    want_ir: bool = False,
    want_object: bool = False,
    concurrency: int = 2,
    refine: bool = False,
    deadline: Deadline | None = None,
    parts: UnitParts | None = None,
) -> tuple[FunctionLists, Evaluation] | None:
    """The per-function choice among `candidates` (and, with `refine`, one round of `refine_functions`)
    and its Evaluation on the whole unit; None for a unit of fewer than two function modules (its
    whole-unit lists already cover it). The service's per-function candidate (serve/optimize/optimizer.py).

    `parts`: the unit already split (None: split here, as a job in a compiler worker, where LLVM may crash
    or be killed at the deadline). Every compile carries `deadline`; with one, the
    refining round runs only while twice the first round's time is left before it (a round costs about
    what the first did), so a long unit keeps its candidate. Raises IRError when the unit cannot be split
    (then it has only whole-unit candidates), StoppedError when the deadline cut a compile.
    """
    if parts is None:
        parts = await compiler.run_async(split_unit, ir, deadline=deadline)
    if len(parts.functions) < 2:
        return None
    started = time.monotonic()
    measured = await measure_functions(parts, candidates, objective, compiler, concurrency, deadline)
    chosen = measured.choose()
    searched_s = time.monotonic() - started
    if refine and (deadline is None or deadline.remaining_s() > 2 * searched_s):
        refined, _ = await refine_functions(
            parts, measured.best(), objective, compiler, concurrency, deadline=deadline
        )
        chosen = FunctionLists.of({n: p for n, (p, _) in refined.items()}, default=chosen.default)
    (unit,) = await compiler.evaluate_async(ir, [chosen], objective, want_ir, want_object, deadline=deadline)
    if cut_by_deadline([unit]):
        raise StoppedError("the deadline came while linking the per-function candidate")
    return chosen, unit
