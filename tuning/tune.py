"""`optserve tune`: search pass lists for the units the service recorded, off the build's critical path.

First, every raw unit (bitcode a build sent and the service recorded unread, `TuningStore.record_raw`) is
read by LLVM in a task's compiler process, recorded as a unit (its text IR under its unit hash, as the
service records a unit it read) and linked to its bytes (`link_raw`), so the next build of the same bitcode
is answered from the store; bitcode LLVM cannot read is reported, left pending, and the run goes on.

Then, for every recorded unit whose tuned budget under this install's toolchain (objective, the unit's target
triple, LLVM version, pass vocabulary) is below the requested budget N:
  1. its keys (`unit_keys`, the one definition the service looks entries up with): the unit's hash and one
     hash per function module;
  2. each function module whose store entry has fewer than N compiles is searched: `local_search` (the
     project's search, compiler/autotune.py) from -Oz, the list an earlier run stored for it, the coreset's
     first lists and any `seed_lists` (the hook for the model's priority samples), budget N (the store adds
     the compiles up, so a run at a higher budget goes on from a lower one). Its best list is stored when it
     beats -Oz; otherwise
     -Oz itself is stored with its cost, the record that the function was searched at that budget and nothing
     beat -Oz (the fast path gives such a function -Oz, as it does a function without an entry: lookup.py);
  3. the whole unit: the functions' stored lists linked back (`FunctionLists`, as optcc's answer links them),
     the unit's -Oz and the coreset's first whole-unit lists; the cheapest is stored as the unit entry when it
     beats the unit's -Oz, so the stored answer is never worse than -Oz. A unit with no split (one function,
     more than `max_functions`, or one `split_unit` refuses) gets one `local_search` of its own instead;
  4. the unit's tuned budget is set to N: a later run at the same budget skips it.

Splits, searches and unit measurements run as Ray tasks of one CPU each, so every node of a Ray cluster
shares them; each task compiles in a crash-isolated CompilerPool process that its Ray worker keeps between
tasks (an LLVM abort fails one candidate, not the run). Ray runs its workers at nice 15 (Ray's
`worker_niceness`), so on a machine that also builds, tuning takes only the CPU the build leaves. The driver
writes each result to the store as it arrives: a killed run keeps everything written before the kill, and the
next run starts from there.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from optserve.compiler.autotune import LocalSearchResult, local_search
from optserve.compiler.function_lists import FunctionLists
from optserve.compiler.ir import parse_ir
from optserve.compiler.pipeline import OZ
from optserve.compiler.workers import CompilerPool
from optserve.tuning.keys import current_toolchain, llvm_version
from optserve.tuning.lookup import target_triple
from optserve.tuning.records import Toolchain, TunedList
from optserve.tuning.store import TuningStore
from optserve.tuning.unit_keys import UnitKeys, unit_hash, unit_keys

FOUND_BY_FUNCTION = "local_search"  # a function's list, or -Oz when the search found nothing better
FOUND_BY_UNIT_LISTS = "tune:unit"  # the cheapest of the linked function lists and the whole-unit lists
CORESET_SEEDS = 10  # the coreset's first lists that seed each search (the service's unit_function_lists)
UNIT_CORESET_LISTS = 4  # the coreset's first lists tried on a whole unit beside its linked function lists


@dataclass(frozen=True)
class SearchPlan:
    """What every task of one run compiles: the objective, the budget, the search's seed lists (-Oz first),
    the whole-unit lists, and the limits of a task's compiler process (`settings.compiler`)."""

    objective: str
    budget: int
    seed_lists: tuple[tuple[str, ...], ...]
    unit_lists: tuple[tuple[str, ...], ...]
    candidate_timeout_s: float = 20.0
    worker_memory_mb: int | None = 4096
    max_ir_bytes: int = 4 * 1024 * 1024  # the largest raw unit read (the service's compiler.max_ir_bytes)


@dataclass
class TuneSummary:
    """What a run did. `saved_by_units` sums -Oz cost less the cost of each unit's best answer found in this
    run (its unit entry, or -Oz where nothing beat it); `saved_by_functions` the same over the function
    entries written, each measured on its own module. Costs are in the objective's unit (bytes of `.text`,
    or instructions)."""

    objective: str
    budget: int
    workers: int = 0  # Ray CPUs the run had (0: nothing to tune, Ray not started)
    raw_units_read: int = 0  # raw units (bitcode recorded unread) read and recorded as units first
    raw_units_unreadable: int = 0  # raw units LLVM could not read (reported in `failures`, left pending)
    units: int = 0  # units tuned in this run
    units_at_budget: int = 0  # recorded units already tuned at this budget (skipped)
    units_failed: int = 0
    functions: int = 0  # function modules searched
    functions_at_budget: int = 0  # function modules whose entry already had the budget (not searched)
    compiles: int = 0
    saved_by_units: int = 0
    saved_by_functions: int = 0
    min_saved: int = 0  # the service's bar (tuning.min_saved_bytes): a unit entry saving less is not given
    units_below_bar: int = 0  # units whose entry saves less than `min_saved`: built with -Oz
    saved_below_bar: int = 0  # what those entries save (in `saved_by_units`, not in a build)
    oz_cost_of_units: int = 0  # the -Oz cost of the units tuned, what `saved_by_units` is a share of
    compile_cpu_seconds: float = 0.0  # CPU time of the compiler processes (Linux; what compiles cost a core)
    seconds: float = 0.0  # the whole run's wall time
    startup_seconds: float = 0.0  # of which starting (or joining) Ray
    failures: list[str] = field(default_factory=list)  # "unit name: why", one per unit or function failed

    @property
    def compiles_per_s(self) -> float:
        """Compiles per second of the tuning itself (Ray's start left out)."""
        working = self.seconds - self.startup_seconds
        return self.compiles / working if working > 0 else 0.0

    @property
    def compiles_per_cpu_s(self) -> float:
        """Compiles per CPU second of the compiler processes: a core's throughput, whatever else runs."""
        return self.compiles / self.compile_cpu_seconds if self.compile_cpu_seconds else 0.0

    @property
    def saved_percent(self) -> float:
        """`saved_by_units` as a percentage of the tuned units' -Oz cost."""
        return 100 * self.saved_by_units / self.oz_cost_of_units if self.oz_cost_of_units else 0.0

    def count_unit_answer(self, saved: int) -> None:
        """A unit entry written, saving `saved` against -Oz; counted apart too when below the bar."""
        self.saved_by_units += saved
        if saved < self.min_saved:
            self.units_below_bar += 1
            self.saved_below_bar += saved

    def as_dict(self) -> dict[str, Any]:
        derived = {
            "compiles_per_s": round(self.compiles_per_s, 2),
            "compiles_per_cpu_s": round(self.compiles_per_cpu_s, 2),
            "saved_percent": round(self.saved_percent, 3),
        }
        return {**asdict(self), **derived}


# --- the tasks (run in Ray workers; plain functions, callable without Ray) ------------------------------

_POOL: CompilerPool | None = None
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _pool(plan: SearchPlan) -> CompilerPool:
    """This process's compiler process, started by its first task and kept for the tasks after it."""
    global _POOL
    if _POOL is None:
        _POOL = CompilerPool(1, plan.candidate_timeout_s, memory_limit_mb=plan.worker_memory_mb)
    return _POOL


def read_raw_task(bitcode: bytes, plan: SearchPlan) -> tuple[str, str, str]:
    """A raw unit read by LLVM in this process's compiler process (`compiler.ir.parse_ir`: bitcode that
    crashes LLVM ends that process, not the task's worker): its text IR, unit hash and target triple."""
    ir = _pool(plan).run(parse_ir, bitcode, plan.max_ir_bytes)
    return ir, unit_hash(ir), target_triple(ir)


def llvm_version_task() -> str:
    """The version of the LLVM this process's tasks compile with (`tuning.keys.llvm_version`)."""
    return llvm_version()


def split_task(ir: str, max_functions: int) -> UnitKeys:
    """The unit's keys and its function modules (`unit_keys`)."""
    return unit_keys(ir, max_functions)


def _cpu_seconds(pool: CompilerPool) -> float:
    """CPU seconds (user + system) the pool's compiler processes have used so far (Linux /proc; else 0)."""
    total = 0.0
    for pid in pool.worker_pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime
    return total


def _timed(pool: CompilerPool, work: Callable[[], Any]) -> tuple[Any, float]:
    """`work()` and the compiler CPU seconds it took: what compiles cost whatever else the machine runs."""
    before = _cpu_seconds(pool)
    result = work()
    return result, max(0.0, _cpu_seconds(pool) - before)


def search_task(
    ir: str, plan: SearchPlan, found: Sequence[Sequence[str]] = ()
) -> tuple[LocalSearchResult, float]:
    """`local_search` of one function module (or a whole unit without a split) at the plan's budget, and
    the compiler CPU seconds it took. `found`: lists an earlier run stored for it, tried right after -Oz,
    so a run at a higher budget goes on from them."""
    pool = _pool(plan)
    seeds = list(dict.fromkeys([OZ, *(tuple(p) for p in found), *plan.seed_lists]))
    return _timed(
        pool,
        lambda: local_search(
            ir, budget=plan.budget, objective=plan.objective, seeds=seeds, seed=0, pool=pool
        ),
    )


@dataclass(frozen=True)
class TunedListParts:
    """The list part of a unit entry: `pass_list` (the default of the functions not named) and the lists of
    named functions (empty for a whole-unit list)."""

    pass_list: tuple[str, ...]
    function_lists: tuple[tuple[str, tuple[str, ...]], ...]
    cost: int


@dataclass(frozen=True)
class UnitMeasurement:
    """A whole unit's candidates measured: its -Oz cost (None: -Oz failed, and why) and the cheapest
    candidate that beats it, if any."""

    oz_cost: int | None
    best: TunedListParts | None
    compiles: int
    error: str = ""


def unit_task(
    ir: str, function_lists: dict[str, tuple[str, ...]], plan: SearchPlan
) -> tuple[UnitMeasurement, float]:
    """The unit's -Oz, the plan's whole-unit lists and `function_lists` linked (functions not named: -Oz),
    measured on the whole unit: the cheapest that beats -Oz (the earlier candidate on a tie), and the
    compiler CPU seconds it took."""
    pool = _pool(plan)
    return _timed(pool, lambda: _measure_unit(ir, function_lists, plan, pool))


def _measure_unit(
    ir: str, function_lists: dict[str, tuple[str, ...]], plan: SearchPlan, pool: CompilerPool
) -> UnitMeasurement:
    linked = FunctionLists.of(function_lists, default=OZ)
    whole = [p for p in dict.fromkeys(plan.unit_lists) if p != OZ]
    candidates: list[tuple[str, ...] | FunctionLists] = [OZ, *whole, linked]
    evaluations = pool.evaluate(ir, candidates, plan.objective)
    oz = evaluations[0]
    if oz.cost is None:
        return UnitMeasurement(None, None, len(candidates), oz.error or "-Oz failed")
    best = None
    for candidate, evaluation in zip(candidates[1:], evaluations[1:], strict=True):
        if evaluation.cost is not None and evaluation.cost < (best.cost if best else oz.cost):
            if isinstance(candidate, FunctionLists):
                best = TunedListParts(candidate.default, candidate.lists, evaluation.cost)
            else:
                best = TunedListParts(tuple(candidate), (), evaluation.cost)
    return UnitMeasurement(oz.cost, best, len(candidates))


# --- the driver -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingUnit:
    """A recorded unit below the budget: the hash it was recorded under and the toolchain it is tuned for."""

    recorded_hash: str
    name: str
    toolchain: Toolchain


def pending_units(
    store: TuningStore, objective: str, budget: int, limit: int | None = None, llvm: str | None = None
) -> tuple[list[PendingUnit], int]:
    """The recorded units whose tuned budget is below `budget` (at most `limit`), and how many are at it,
    under the toolchain of LLVM version `llvm` (None: this process's, `tuning.keys.current_toolchain`)."""
    pending, at_budget = [], 0
    for unit in store.recorded_units():
        toolchain = current_toolchain(objective, target_triple(unit.ir), llvm)
        if store.tuned_budget(unit.ir_hash, toolchain) >= budget:
            at_budget += 1
        elif limit is None or len(pending) < limit:
            pending.append(PendingUnit(unit.ir_hash, unit.name, toolchain))
    return pending, at_budget


@dataclass
class _OpenUnit:
    """A unit in progress: its keys once split, and the function searches it waits for."""

    pending: PendingUnit
    ir: str
    keys: UnitKeys | None = None
    waiting: set[str] = field(default_factory=set)


class RayTasks:
    """The run's Ray tasks (one CPU each, never retried: a crashed task fails its one unit or function)."""

    def __init__(self, cpus_per_task: float = 1) -> None:
        """`cpus_per_task` 0: tasks that reserve no CPU (the service's background tuning, whose cluster's
        CPUs its replicas hold), so they run beside the replicas at Ray workers' low OS priority."""
        import ray

        self.ray = ray
        options = {"num_cpus": cpus_per_task, "max_retries": 0}
        self.read_raw = ray.remote(**options)(read_raw_task)
        self.llvm_version = ray.remote(**options)(llvm_version_task)
        self.split = ray.remote(**options)(split_task)
        self.search = ray.remote(**options)(search_task)
        self.unit = ray.remote(**options)(unit_task)

    @property
    def cpus(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))


def tune(
    store: TuningStore,
    plan: SearchPlan,
    *,
    max_functions: int,
    limit_units: int | None = None,
    progress: Callable[[TuneSummary, int], None] | None = None,
    tasks_factory: Callable[[], RayTasks] = RayTasks,
    llvm: str | None = None,
    min_saved: int = 0,
) -> TuneSummary:
    """Read the pending raw units, then tune every recorded unit below `plan.budget` (module docstring) on
    the Ray this process is connected to (tuning/cli.py: `connect_ray`); results are written to `store` as
    they arrive. `progress(summary, pending_units)` is called after every raw unit read (pending_units 0:
    not known yet), once before the first tuning task and after every result. `llvm`: the LLVM version the
    tasks compile with, as a task reported it (`RayTasks.llvm_version`), for a process that loads no LLVM
    of its own (the service's ingress, tuning/background.py); None: this process's llvmlite's. `min_saved`:
    the service's bar on what a stored answer saves (tuning.min_saved_bytes), for the summary: an entry
    below it is stored (a lower bar gives it) but counted apart, as builds get -Oz for its unit."""
    started = time.monotonic()
    summary = TuneSummary(plan.objective, plan.budget, min_saved=min_saved)
    tasks: RayTasks | None = None

    def connected() -> RayTasks:
        nonlocal tasks
        if tasks is None:
            connecting = time.monotonic()
            tasks = tasks_factory()
            summary.startup_seconds = time.monotonic() - connecting
        return tasks

    if store.stats().pending_raw_units:
        read_raw_units(store, plan, connected(), summary, progress)
    pending, summary.units_at_budget = pending_units(store, plan.objective, plan.budget, limit_units, llvm)
    if progress is not None:
        progress(summary, len(pending))
    if pending:
        _Run(store, plan, max_functions, pending, summary, connected(), progress).run()
    summary.seconds = time.monotonic() - started
    return summary


def read_raw_units(
    store: TuningStore,
    plan: SearchPlan,
    tasks: RayTasks,
    summary: TuneSummary,
    progress: Callable[[TuneSummary, int], None] | None = None,
) -> None:
    """Read every pending raw unit (`read_raw_task`, two per CPU in flight), record it as a unit and link
    its bytes to it; one LLVM cannot read is counted, reported in `summary.failures` and left pending."""
    ray = tasks.ray
    raw_units = iter(store.pending_raw())
    in_flight: dict[Any, tuple[str, str]] = {}  # Ray ref -> (raw hash, name)
    while True:
        while len(in_flight) < 2 * tasks.cpus and (raw := next(raw_units, None)) is not None:
            in_flight[tasks.read_raw.remote(raw.bitcode, plan)] = (raw.raw_hash, raw.name)
        if not in_flight:
            return
        (ref,), _ = ray.wait(list(in_flight), num_returns=1)
        raw_hash, name = in_flight.pop(ref)
        try:
            ir, unit, target = ray.get(ref)
        except ray.exceptions.RayError as err:  # bitcode LLVM refuses (or crashes on): this unit only
            summary.raw_units_unreadable += 1
            summary.failures.append(
                f"{name or raw_hash[:12]}: its bitcode cannot be read: {_first_line(err)}"
            )
        else:
            store.record_unit(unit, ir, name)
            store.link_raw(raw_hash, unit, target)
            summary.raw_units_read += 1
        if progress is not None:
            progress(summary, 0)


class _Run:
    """One run's event loop: units enter a window as the store yields them, each moves split -> function
    searches -> unit measurement, and every result is written to the store before the next is awaited.

    Tasks wait in the driver's queue and go to Ray two per CPU, a unit's measurement ahead of every search:
    units finish (and get their budget) one after another rather than all at the end, so a killed run loses
    at most the few units that were open."""

    def __init__(self, store, plan, max_functions, pending, summary, tasks, progress):
        self.store, self.plan, self.max_functions = store, plan, max_functions
        self.wanted = {unit.recorded_hash: unit for unit in pending}
        self.summary, self.tasks, self.progress, self.total = summary, tasks, progress, len(pending)
        self.summary.workers = tasks.cpus
        self.window = 2 * tasks.cpus + 1  # units open at once: enough work queued for every CPU
        self.open_units = 0
        self.in_flight: dict[Any, tuple[str, Any]] = {}  # Ray ref -> (step, its unit or function)
        self.queued: deque[tuple[str, Any, Any, tuple]] = deque()  # (step, whose, remote function, args)
        self.slots = 2 * tasks.cpus  # tasks handed to Ray at once: one running and one ready per CPU
        self.searching: dict[tuple[str, Toolchain], list[_OpenUnit]] = {}  # function key -> units waiting
        self.steps = {"split": self._split, "search": self._searched, "unit": self._measured}

    def run(self) -> None:
        ray = self.tasks.ray
        recorded = (u for u in self.store.recorded_units() if u.ir_hash in self.wanted)
        exhausted = False
        while True:
            while not exhausted and self.open_units < self.window:
                unit = next(recorded, None)
                if unit is None:
                    exhausted = True
                    break
                open_unit = _OpenUnit(self.wanted.pop(unit.ir_hash), unit.ir)
                self._submit("split", open_unit, self.tasks.split, unit.ir, self.max_functions)
                self.open_units += 1
            while self.queued and len(self.in_flight) < self.slots:
                step, whose, remote, args = self.queued.popleft()
                self.in_flight[remote.remote(*args)] = (step, whose)
            if not self.in_flight:
                return
            (ref,), _ = ray.wait(list(self.in_flight), num_returns=1)
            step, whose = self.in_flight.pop(ref)
            try:
                result, error = ray.get(ref), ""
            except ray.exceptions.RayError as err:  # the task raised, or its worker died: this item only
                result, error = None, _first_line(err)
            if step != "split" and result is not None:
                result, cpu_seconds = result
                self.summary.compile_cpu_seconds += cpu_seconds
            {"split": self._split, "search": self._searched, "unit": self._measured}[step](
                whose, result, error
            )
            if self.progress is not None:
                self.progress(self.summary, self.total)

    def _split(self, unit: _OpenUnit, keys: UnitKeys | None, error: str) -> None:
        if keys is None:
            return self._failed(unit, f"split: {error}")
        unit.keys = keys
        if not keys.function_hashes:  # no split: the unit is searched as one
            earlier = self.store.lookup_unit(keys.unit_hash, unit.pending.toolchain)
            found = [earlier.pass_list] if earlier is not None and not earlier.function_lists else []
            self._submit("unit", unit, self.tasks.search, unit.ir, self.plan, found)
            return None
        toolchain = unit.pending.toolchain
        stored = self.store.lookup_functions(sorted(set(keys.function_hashes.values())), toolchain)
        for name, function_hash in sorted(keys.function_hashes.items()):
            key = (function_hash, toolchain)
            entry = stored.get(function_hash)
            if key in self.searching:  # a module shared with another open unit (or twice in this one)
                if unit not in self.searching[key]:
                    self.searching[key].append(unit)
                unit.waiting.add(function_hash)
            elif entry is not None and entry.compiles >= self.plan.budget:
                self.summary.functions_at_budget += 1
            else:
                self.searching[key] = [unit]
                unit.waiting.add(function_hash)
                found = [entry.pass_list] if entry is not None else []
                module = keys.parts.functions[name]
                self._submit("search", (key, name), self.tasks.search, module, self.plan, found)
        if not unit.waiting:
            self._measure(unit)
        return None

    def _searched(self, whose, result: LocalSearchResult | None, error: str) -> None:
        (function_hash, toolchain), name = whose
        units = self.searching.pop((function_hash, toolchain))
        if result is None:
            self.summary.failures.append(f"{_label(units[0])} {name}: {error}")
        else:
            better = result.best_cost < result.oz_cost
            entry = TunedList(
                ir_hash=function_hash,
                toolchain=toolchain,
                kind="function",
                pass_list=tuple(result.best_pass_list) if better else OZ,
                function_lists=(),
                cost=result.best_cost if better else result.oz_cost,
                oz_cost=result.oz_cost,
                compiles=result.compilations,
                found_by=FOUND_BY_FUNCTION,
                found_at=time.time(),
            )
            self.store.offer([entry])
            self.summary.functions += 1
            self.summary.compiles += result.compilations
            self.summary.saved_by_functions += entry.saved
        for unit in units:
            unit.waiting.discard(function_hash)
            if not unit.waiting:
                self._measure(unit)

    def _measure(self, unit: _OpenUnit) -> None:
        """Measure the unit with its functions' stored lists (found by this run or earlier ones)."""
        hashes = unit.keys.function_hashes
        stored = self.store.lookup_functions(sorted(set(hashes.values())), unit.pending.toolchain)
        lists = {
            name: tuple(stored[h].pass_list)
            for name, h in hashes.items()
            if h in stored and tuple(stored[h].pass_list) != OZ
        }
        self._submit("unit", unit, self.tasks.unit, unit.ir, lists, self.plan, first=True)

    def _submit(self, step: str, whose: Any, remote: Any, *args: Any, first: bool = False) -> None:
        """Queue a task: last, or `first` (a unit's measurement, which finishes the unit)."""
        (self.queued.appendleft if first else self.queued.append)((step, whose, remote, args))

    def _measured(self, unit: _OpenUnit, result, error: str) -> None:
        if isinstance(result, LocalSearchResult):  # a unit without a split, searched as one
            beats_oz = result.best_cost < result.oz_cost
            best = TunedListParts(tuple(result.best_pass_list), (), result.best_cost) if beats_oz else None
            result = UnitMeasurement(result.oz_cost, best, result.compilations)
        if result is None or result.oz_cost is None:
            if result is not None:
                self.summary.compiles += result.compiles
            return self._failed(unit, error or result.error)
        self.summary.compiles += result.compiles
        self.summary.oz_cost_of_units += result.oz_cost
        toolchain = unit.pending.toolchain
        if result.best is not None:
            found_by = FOUND_BY_UNIT_LISTS if unit.keys.function_hashes else FOUND_BY_FUNCTION
            entry = TunedList(
                ir_hash=unit.keys.unit_hash,
                toolchain=toolchain,
                kind="unit",
                pass_list=result.best.pass_list,
                function_lists=result.best.function_lists,
                cost=result.best.cost,
                oz_cost=result.oz_cost,
                compiles=result.compiles,
                found_by=found_by,
                found_at=time.time(),
            )
            self.store.offer([entry])
            self.summary.count_unit_answer(entry.saved)
        self.store.set_tuned_budget(unit.pending.recorded_hash, toolchain, self.plan.budget)
        self.summary.units += 1
        self.open_units -= 1
        return None

    def _failed(self, unit: _OpenUnit, error: str) -> None:
        """A unit that cannot be tuned: reported, its budget left unset (a later toolchain may do better)."""
        self.summary.units_failed += 1
        self.summary.failures.append(f"{_label(unit)}: {error}")
        self.open_units -= 1


def _label(unit: _OpenUnit) -> str:
    return unit.pending.name or unit.pending.recorded_hash[:12]


def _first_line(err: BaseException) -> str:
    """A Ray error's cause in one line (Ray's own message carries the remote traceback)."""
    cause = getattr(err, "cause", None)
    text = f"{type(cause).__name__}: {cause}" if cause is not None else f"{type(err).__name__}: {err}"
    return " ".join(text.split())[:300]


def search_plan(
    objective: str,
    budget: int,
    coreset_lists: Sequence[Sequence[str]],
    seed_lists: Iterable[Sequence[str]] = (),
    candidate_timeout_s: float = 20.0,
    worker_memory_mb: int | None = 4096,
    max_ir_bytes: int = 4 * 1024 * 1024,
) -> SearchPlan:
    """The plan of a run: each search seeded with -Oz, the coreset's first `CORESET_SEEDS` lists and then
    `seed_lists` (e.g. the model's priority samples); each unit measured with the first UNIT_CORESET_LISTS."""
    coreset = [tuple(p) for p in coreset_lists]
    seeds = dict.fromkeys([OZ, *coreset[:CORESET_SEEDS], *(tuple(p) for p in seed_lists)])
    return SearchPlan(
        objective=objective,
        budget=budget,
        seed_lists=tuple(seeds),
        unit_lists=tuple(coreset[:UNIT_CORESET_LISTS]),
        candidate_timeout_s=candidate_timeout_s,
        worker_memory_mb=worker_memory_mb,
        max_ir_bytes=max_ir_bytes,
    )
