"""The autotuner of the thesis (§4.3.2): random search under a compile budget and/or a time limit, with
-Oz as the floor, then minimization (drop passes that do not help).

Search draws random pass lists (an optional meta flag, then 1..`max_passes` passes) from a seeded RNG and
compiles them in batches. The best list starts as -Oz, so the result is never worse than -Oz. Minimization
repeatedly drops the pass whose removal gives the lowest cost not above the best, until every removal makes
the list worse: the final list is locally minimal and costs no more than the list it started from.

Identical lists are compiled once per run (they do not use budget). With a budget and no time limit the
result is deterministic for a given seed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optserve.compiler.cost import Objective
from optserve.compiler.interface import Evaluation
from optserve.compiler.ir import IRError
from optserve.compiler.passes import META_FLAGS, PASS_NAMES
from optserve.compiler.pipeline import OZ, evaluate
from optserve.compiler.workers import CompilerPool

# progress(compilations so far, compilation budget, best cost so far)
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class AutotuneResult:
    objective: str
    unoptimized_cost: int
    oz_cost: int
    best_cost: int
    best_pass_list: tuple[str, ...]
    compilations: int  # all compilations: baselines, search and minimization
    search_compilations: int
    minimization_compilations: int
    failed_compilations: int  # candidates that crashed, timed out or failed to verify
    seconds: float

    @property
    def improvement_over_oz(self) -> float:
        """Fraction of the -Oz cost saved (0.0 when the best list is -Oz or no better)."""
        return (self.oz_cost - self.best_cost) / self.oz_cost if self.oz_cost else 0.0


class _Evaluator:
    """Compiles candidates (in a pool, or in this process), once per distinct list, counting compilations."""

    def __init__(self, ir: str, objective: Objective, pool: CompilerPool | None):
        self.ir, self.objective, self.pool = ir, objective, pool
        self.costs: dict[tuple[str, ...], int | None] = {}
        self.compilations = 0
        self.failures = 0

    def costs_of(self, pass_lists: Sequence[tuple[str, ...]]) -> list[int | None]:
        new = list(dict.fromkeys(p for p in pass_lists if p not in self.costs))
        if new:
            if self.pool is not None:
                evaluations = self.pool.evaluate(self.ir, new, self.objective)
            else:
                evaluations = [evaluate(self.ir, pass_list, self.objective) for pass_list in new]
            self._record(evaluations)
        return [self.costs[p] for p in pass_lists]

    def _record(self, evaluations: list[Evaluation]) -> None:
        for evaluation in evaluations:
            self.costs[evaluation.pass_list] = evaluation.cost
            self.compilations += 1
            self.failures += evaluation.cost is None


def _baselines(ir: str, objective: Objective, pool: CompilerPool | None) -> tuple[_Evaluator, int, int]:
    """An evaluator for `ir` with -O0 and -Oz compiled: (evaluator, unoptimized cost, -Oz cost)."""
    evaluator = _Evaluator(ir, objective, pool)
    unoptimized_cost, oz_cost = evaluator.costs_of([(), OZ])
    if unoptimized_cost is None or oz_cost is None:
        raise IRError(f"cannot compile this IR at -O0/-Oz (objective {objective})")
    return evaluator, unoptimized_cost, oz_cost


def random_pass_list(rng: random.Random, max_passes: int) -> tuple[str, ...]:
    """An optional meta flag (each of the six or none, equally likely), then 1..max_passes random passes."""
    meta = rng.choice((*META_FLAGS, None))
    passes = tuple(rng.choice(PASS_NAMES) for _ in range(rng.randint(1, max_passes)))
    return ((meta,) if meta else ()) + passes


def _better(cost: int, pass_list: tuple[str, ...], best_cost: int, best_list: tuple[str, ...]) -> bool:
    return cost < best_cost or (cost == best_cost and len(pass_list) < len(best_list))


def autotune(
    ir: str,
    *,
    budget: int,
    objective: Objective | str = Objective.INSTRUCTION_COUNT,
    time_limit_s: float | None = None,
    seed: int = 0,
    pool: CompilerPool | None = None,
    progress: Progress | None = None,
    max_passes: int = 8,
    batch_size: int | None = None,
) -> AutotuneResult:
    """Search for a pass list that beats -Oz on `ir`; see the module docstring for the algorithm.

    `budget` bounds the distinct random candidates compiled; `time_limit_s` (optional) stops the search
    earlier. Without a `pool` candidates compile in this process (no crash isolation: use a pool for IR
    you do not trust).
    """
    if budget < 0:
        raise ValueError("budget must be >= 0")
    started = time.monotonic()
    objective = Objective(objective)
    evaluator, unoptimized_cost, oz_cost = _baselines(ir, objective, pool)
    best_cost, best_list = oz_cost, OZ

    rng = random.Random(seed)
    batch_size = batch_size or (4 * pool.processes if pool is not None else 16)
    searched, draws = 0, 0
    while searched < budget and draws < 20 * budget:
        if time_limit_s is not None and time.monotonic() - started >= time_limit_s:
            break
        batch: dict[tuple[str, ...], None] = {}
        while len(batch) < min(batch_size, budget - searched) and draws < 20 * budget:
            draws += 1
            candidate = random_pass_list(rng, max_passes)
            if candidate not in evaluator.costs:
                batch[candidate] = None
        before = evaluator.compilations
        for candidate, cost in zip(batch, evaluator.costs_of(list(batch)), strict=True):
            if cost is not None and _better(cost, candidate, best_cost, best_list):
                best_cost, best_list = cost, candidate
        searched += evaluator.compilations - before
        if progress is not None:
            progress(searched, budget, best_cost)
    search_compilations = evaluator.compilations

    best_cost, best_list = _minimize(evaluator, best_cost, best_list)
    return AutotuneResult(
        objective=str(objective),
        unoptimized_cost=unoptimized_cost,
        oz_cost=oz_cost,
        best_cost=best_cost,
        best_pass_list=best_list,
        compilations=evaluator.compilations,
        search_compilations=search_compilations - 2,
        minimization_compilations=evaluator.compilations - search_compilations,
        failed_compilations=evaluator.failures,
        seconds=time.monotonic() - started,
    )


def _minimize(
    evaluator: _Evaluator, best_cost: int, best_list: tuple[str, ...]
) -> tuple[int, tuple[str, ...]]:
    """Drop passes while some removal costs no more than the current best (lowest cost wins, then first)."""
    while best_list:
        shorter = [best_list[:i] + best_list[i + 1 :] for i in range(len(best_list))]
        scored = [(cost, i) for i, cost in enumerate(evaluator.costs_of(shorter)) if cost is not None]
        acceptable = [(cost, i) for cost, i in scored if cost <= best_cost]
        if not acceptable:
            break
        cost, index = min(acceptable)
        best_cost, best_list = cost, shorter[index]
    return best_cost, best_list


# --- local search from seed lists (the labelling search for real code) ---------------------------------

LOCAL_SEARCH_VERSION = "ls1"


@dataclass(frozen=True)
class LocalSearchResult:
    objective: str
    unoptimized_cost: int
    oz_cost: int
    best_cost: int
    best_pass_list: tuple[str, ...]
    top: tuple[tuple[int, tuple[str, ...]], ...]  # the best distinct lists found, (cost, list), best first
    seed_costs: tuple[int | None, ...]  # the cost of each seed list, in the order given (None: failed)
    compilations: int  # all compilations: baselines, seeds, search and minimization
    failed_compilations: int
    seconds: float
    version: str = LOCAL_SEARCH_VERSION


def mutate(pass_list: tuple[str, ...], rng: random.Random, max_passes: int) -> tuple[str, ...]:
    """One random edit of `pass_list`: insert, delete, replace or swap a pass, or change the meta flag.

    A meta flag stays first and appears at most once, as the grammar requires; the result is never empty.
    """
    meta = pass_list[:1] if pass_list[:1] and pass_list[0] in META_FLAGS else ()
    passes = list(pass_list[len(meta) :])
    edits = ["insert", "replace", "meta"]
    if len(passes) > 1:
        edits += ["delete", "swap"]
    edit = rng.choice(edits)
    if edit == "insert" and len(passes) < max_passes:
        passes.insert(rng.randint(0, len(passes)), rng.choice(PASS_NAMES))
    elif edit == "delete":
        passes.pop(rng.randrange(len(passes)))
    elif edit == "swap":
        i = rng.randrange(len(passes) - 1)
        passes[i], passes[i + 1] = passes[i + 1], passes[i]
    elif edit == "meta":
        meta = tuple(m for m in (rng.choice((*META_FLAGS, None)),) if m)
    elif passes:
        passes[rng.randrange(len(passes))] = rng.choice(PASS_NAMES)
    else:
        passes.append(rng.choice(PASS_NAMES))
    result = (*meta, *passes)
    return result or OZ


def local_search(
    ir: str,
    *,
    budget: int,
    objective: Objective | str = Objective.TEXT_SIZE,
    seeds: Sequence[tuple[str, ...]] = (),
    seed: int = 0,
    pool: CompilerPool | None = None,
    top_k: int = 5,
    explore: float = 0.2,
    max_passes: int = 8,
    batch_size: int | None = None,
    time_limit_s: float | None = None,
) -> LocalSearchResult:
    """Search for lists that beat -Oz by starting from `seeds` and editing the best lists found so far.

    Order: -O0 and -Oz (the floor), then every seed list (e.g. a coreset mined from earlier labels), then
    batches where each candidate is, with probability `explore`, a fresh random list, else one `mutate` of a
    list among the current `top_k` (better ranks drawn more often). Compilations of distinct lists, seeds
    and baselines included, stop at `budget`; minimization of the best list follows and is counted too.
    Deterministic for a given seed when no time limit is set.
    """
    if budget < 2:
        raise ValueError("budget must be >= 2 (the -O0 and -Oz baselines)")
    started = time.monotonic()
    objective = Objective(objective)
    evaluator, unoptimized_cost, oz_cost = _baselines(ir, objective, pool)
    seeds = [tuple(s) for s in seeds]
    seed_lists = list(dict.fromkeys(s for s in seeds if s not in evaluator.costs))[: budget - 2]
    evaluator.costs_of(seed_lists)
    rng = random.Random(seed)
    batch_size = batch_size or (4 * pool.processes if pool is not None else 16)
    draws = 0
    while evaluator.compilations < budget and draws < 20 * budget:
        if time_limit_s is not None and time.monotonic() - started >= time_limit_s:
            break
        ranked = _ranked(evaluator.costs)[:top_k]
        batch: dict[tuple[str, ...], None] = {}
        while len(batch) < min(batch_size, budget - evaluator.compilations) and draws < 20 * budget:
            draws += 1
            if rng.random() < explore or not ranked:
                candidate = random_pass_list(rng, max_passes)
            else:
                parent = ranked[min(int(rng.expovariate(1.0)), len(ranked) - 1)][1]
                candidate = mutate(parent, rng, max_passes)
            if candidate not in evaluator.costs:
                batch[candidate] = None
        evaluator.costs_of(list(batch))
    best_cost, best_list = _ranked(evaluator.costs)[0]
    best_cost, best_list = _minimize(evaluator, best_cost, best_list)
    return LocalSearchResult(
        objective=str(objective),
        unoptimized_cost=unoptimized_cost,
        oz_cost=oz_cost,
        best_cost=best_cost,
        best_pass_list=best_list,
        top=tuple(_ranked(evaluator.costs)[:top_k]),
        seed_costs=tuple(evaluator.costs.get(s) for s in seeds),
        compilations=evaluator.compilations,
        failed_compilations=evaluator.failures,
        seconds=time.monotonic() - started,
    )


def _ranked(costs: dict[tuple[str, ...], int | None]) -> list[tuple[int, tuple[str, ...]]]:
    """Compiled lists by cost, then -Oz first (a tie with the floor is no win), then length and name.

    -O0 (the empty list) is not a candidate answer.
    """
    scored = [(cost, p) for p, cost in costs.items() if cost is not None and p != ()]
    return sorted(scored, key=lambda item: (item[0], item[1] != OZ, len(item[1]), item[1]))
