"""`schedule_nest`: find a schedule for a validated nest with one of the search methods, and report it.

`schedule_contraction` (validate the request's contraction, then `schedule_nest` it with the default method
and time limit) is the entry point the service and the CLI use. Every method starts from the base
schedule; all but "base" search the LoopTune environment, measuring candidates with the JIT backend. A
contraction of more than `timed_flops` a thread is decided on a sub-problem, timed on the request's threads,
and the decision replayed on it (policies/proxy.py), so the decision's cost does not grow with the
contraction's size.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from optserve.config import LoopTuneSettings
from optserve.deadline import SCHEDULE_TIME_LIMIT_S
from optserve.kernels.jit import host_target
from optserve.kernels.measure import measure, numpy_gflops, peak_gflops
from optserve.kernels.parallel import check_parallel, compile_parallel, default_threads, plan_blocks
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.policies import clock
from optserve.policies.decision_cache import CachedDecision, DecisionCache, decision_key
from optserve.policies.env import Evaluator
from optserve.policies.methods import DEFAULT_METHOD, QUICK_METHODS, SearchMethod
from optserve.policies.proxy import replay, timed_spec
from optserve.policies.search import SEARCHES, prepare, run_search

METHODS = tuple(SearchMethod)
CUT_SLACK = 0.2  # of the time budget: how far past it a started timing may run before it is cut to one call
FINALISTS = 3  # kernels of the fastest schedules kept compiled for a rematch of near ties (policies/tiles.py)
REMATCH_ROUNDS = 8  # most interleaved rounds of a rematch


@dataclass(frozen=True)
class ScheduleResult:
    einsum: str
    sizes: dict[str, int]
    method: str
    schedule: str  # one loop per line (Schedule.text)
    loop_order: list[str]  # compute nest indices, outermost first
    loops: list[dict]  # compute nest loops: {"index", "size", "tail"}
    writeback_loops: list[dict]
    actions: list[str]  # the action sequence from the base schedule
    gflops: float | None  # measured GFLOPS of the chosen schedule (None when not measured)
    base_gflops: float | None
    speedup: float | None  # gflops / base_gflops
    seconds: float  # wall time of the whole call
    search_seconds: float
    evaluations: int  # distinct schedules compiled and measured
    # JIT compile time of the chosen schedule (decided on a sub-problem: of its kernel there)
    compile_ms: float | None
    mean_compile_ms: float | None  # mean JIT compile time over every schedule the search measured
    peak_gflops: float | None
    timed_out: bool
    llvm_ir: str | None = None
    timed_sizes: dict[str, int] | None = None  # sizes the candidates were timed on (a sub-problem's)
    threads: int = 1  # threads the chosen kernel runs on (kernels/parallel.py)
    cached: bool = False  # answered from the decision cache (policies/decision_cache.py): nothing searched

    def to_dict(self) -> dict:
        return asdict(self)


def measure_schedule(
    spec: LoopNestSpec,
    schedule: Schedule,
    settings: LoopTuneSettings | None = None,
    compile_log: list[float] | None = None,
    quick: bool = False,
    deadline: float | None = None,
    threads: int = 1,
    finalists: Finalists | None = None,
) -> float:
    """Compile for `threads` threads, time (warm-up, best of N; `quick`: the polish's shorter protocol; a
    kernel too slow to finish it by `deadline`, on the budget clock: one call) and free one schedule (or
    hand it to `finalists`, which keep the fastest); its GFLOPS. Compile seconds go to the log."""
    settings = settings or LoopTuneSettings()
    kernel = compile_parallel(spec, schedule, threads, target=host_target(settings.max_kernel_statements))
    if compile_log is not None:
        compile_log.append(kernel.compile_seconds)
    runs, warmup = settings.timing_repeats, settings.timing_warmup_calls
    if quick:
        runs, warmup = settings.polish_timing_repeats, settings.polish_warmup_calls
    try:
        gflops = measure(kernel, runs=runs, warmup_calls=warmup, deadline=deadline, clock=clock.now).gflops
    except BaseException:
        kernel.close()
        raise
    if finalists is None or not finalists.offer(schedule.compute_key(), gflops, kernel):
        kernel.close()
    return gflops


class Finalists:
    """The compiled kernels of the FINALISTS fastest schedules measured so far (the others are freed as
    they drop out), so that near ties can be timed again without compiling them again (`rematch`)."""

    def __init__(self, size: int = FINALISTS):
        self.size = size
        self.kernels: dict[str, tuple[float, object]] = {}

    def offer(self, key: str, gflops: float, kernel) -> bool:
        """Keep `kernel` if it is among the fastest; False: the caller frees it."""
        if not gflops or key in self.kernels:
            return False
        self.kernels[key] = (gflops, kernel)
        if len(self.kernels) > self.size:
            slowest = min(self.kernels, key=lambda k: self.kernels[k][0])
            _, dropped = self.kernels.pop(slowest)
            if slowest == key:
                return False
            dropped.close()
        return True

    def rematch(self, keys: list[str], deadline: float, settings: LoopTuneSettings) -> dict[str, float]:
        """GFLOPS of the kept kernels of `keys`, timed again in interleaved rounds (each round times each
        once with the quick protocol; a round is started while the mean round's cost fits before
        `deadline`, the first always): the best of its rounds, for every key that was kept."""
        kernels = {key: self.kernels[key][1] for key in keys if key in self.kernels}
        best = dict.fromkeys(kernels, 0.0)
        costs: list[float] = []
        while kernels and len(costs) < REMATCH_ROUNDS:
            if costs and clock.now() + sum(costs) / len(costs) > deadline:
                break
            started = clock.now()
            for key, kernel in kernels.items():
                timing = measure(kernel, runs=settings.polish_timing_repeats, warmup_calls=1, clock=clock.now)
                best[key] = max(best[key], timing.gflops)
            costs.append(clock.now() - started)
        return best

    def close(self) -> None:
        """Free the kept kernels; none is kept after this."""
        for _, kernel in self.kernels.values():
            kernel.close()
        self.kernels.clear()
        self.size = 0


def measure_interleaved(
    spec: LoopNestSpec,
    schedules: list[Schedule],
    rounds: int,
    settings: LoopTuneSettings | None = None,
    numpy_sizes: tuple[int, int, int] | None = None,
    threads: int = 1,
) -> tuple[list[float], float | None]:
    """GFLOPS of schedules that are compared with each other (and of numpy's matmul of `numpy_sizes`), best
    of `rounds` rounds that each time every one of them once: on shared hosts a core's speed drifts over
    seconds, so timing them alternately keeps the drift out of their ratios. Refused schedules score 0."""
    settings = settings or LoopTuneSettings()
    target = host_target(settings.max_kernel_statements)
    kernels = {}
    for schedule in schedules:
        key = schedule.compute_key()
        if key not in kernels:
            try:
                kernels[key] = compile_parallel(spec, schedule, threads, target=target)
            except SpecError:
                kernels[key] = None
    best = dict.fromkeys(kernels, 0.0)
    best_numpy = 0.0
    try:
        for _ in range(rounds):
            for key, kernel in kernels.items():
                if kernel is not None:
                    timing = measure(
                        kernel, runs=settings.timing_repeats, warmup_calls=settings.timing_warmup_calls
                    )
                    best[key] = max(best[key], timing.gflops)
            if numpy_sizes:
                best_numpy = max(best_numpy, numpy_gflops(*numpy_sizes))
    finally:
        for kernel in kernels.values():
            if kernel is not None:
                kernel.close()
    return [best[s.compute_key()] for s in schedules], best_numpy if numpy_sizes else None


def default_time_limit_s(settings: LoopTuneSettings) -> float:
    """The search time of a schedule that names none: SCHEDULE_TIME_LIMIT_S, at most the settings' limit."""
    return min(SCHEDULE_TIME_LIMIT_S, settings.search_time_limit_s)


def schedule_contraction(
    einsum: str,
    sizes: Mapping[str, int],
    settings: LoopTuneSettings,
    *,
    method: str | None = None,
    time_limit_s: float | None = None,
    measure: bool = True,
    emit_ir: bool = False,
    threads: int | None = None,
    cache: DecisionCache | None = None,
) -> ScheduleResult:
    """The entry of the service's Schedule and of `optserve schedule-local`: validate the contraction
    `einsum` over `sizes` against the settings' limits (`LoopNestSpec.parse`) and `schedule_nest` it, with
    DEFAULT_METHOD for no `method` and `default_time_limit_s` for no `time_limit_s`, so both give one
    contraction the same decision. Raises SpecError for a bad contraction, size, method or time limit."""
    spec = LoopNestSpec.parse(einsum, sizes, settings)
    return schedule_nest(
        spec,
        method=method or DEFAULT_METHOD,
        time_limit_s=default_time_limit_s(settings) if time_limit_s is None else time_limit_s,
        measure=measure,
        emit_ir=emit_ir,
        settings=settings,
        threads=threads,
        cache=cache,
    )


def schedule_nest(
    spec: LoopNestSpec,
    method: str = SearchMethod.GREEDY2,
    time_limit_s: float = 10.0,
    measure: bool = True,
    emit_ir: bool = False,
    settings: LoopTuneSettings | None = None,
    threads: int | None = None,
    cache: DecisionCache | None = None,
) -> ScheduleResult:
    """Search a schedule for `spec` with `method` within `time_limit_s` seconds, for a kernel on up to
    `threads` threads (None: `settings.threads`, else the CPUs this process may run on): candidates are
    timed on that many (kernels/parallel.py), on a sub-problem where the contraction is larger than
    `settings.timed_flops` a thread (policies/proxy.py). The quick decision keeps the fastest few kernels
    compiled and times its near ties again, interleaved, before it chooses (policies/tiles.py
    `settle_ties`).

    Searches measure every candidate as they go; `measure` additionally makes sure the chosen schedule is
    timed and the JIT compile time reported ("base" with measure=False compiles nothing unless `emit_ir`).
    The base schedule is timed after a search that did not reach it, except in a quick decision: there every
    measurement, the base's included, comes out of the polish budget, and the base is only the last
    fallback (a scalar base of a large contraction can take longer than the whole budget), so its GFLOPS
    are None when the budget ran out first. After the first schedule, a timing that would end more than
    CUT_SLACK past the budget is cut to one call. GFLOPS are noisy on a busy machine. Raises SpecError for
    a bad method or time limit.

    The budget is counted on `settings.budget_clock` (policies/clock.py: wall time, or the deciding thread's
    CPU time); `seconds` and `search_seconds` are wall time either way.

    With a `cache` (policies/decision_cache.py), a decision already made for the same contraction, sizes,
    method, threads and CPU model is answered from it without search (`cached`, no evaluations; its GFLOPS
    are the ones measured when it was decided; the kernel is compiled only for `emit_ir`), and a new
    decision is stored there (a search's only where its time limit did not cut it; the quick decisions
    always spend their polish budget).
    """
    settings = settings or LoopTuneSettings()
    threads = threads or settings.threads or default_threads()
    if not 1 <= threads <= settings.max_threads:
        raise SpecError(f"threads must be in 1..{settings.max_threads}, got {threads}")
    if method not in SEARCHES:
        raise SpecError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    key = decision_key(spec, method, threads) if cache is not None else None
    if cache is not None and key is not None:
        hit = cache.get(key)
        if hit is not None and measure and hit.gflops is None:  # decided unmeasured: decide again, timed
            hit = None
        answer = _cached_result(spec, method, hit, emit_ir, settings, threads) if hit else None
        if answer is not None:
            return answer
    with clock.budget_clock(settings.budget_clock):
        result = _schedule_nest(spec, method, time_limit_s, measure, emit_ir, settings, threads)
    # a quick decision always spends its polish budget (timed out by design); a search cut short is not kept
    if cache is not None and key is not None and (method in QUICK_METHODS or not result.timed_out):
        decision = CachedDecision(
            schedule=result.schedule,
            actions=tuple(result.actions),
            gflops=result.gflops,
            base_gflops=result.base_gflops,
            timed_sizes=result.timed_sizes,
            threads=result.threads,
        )
        cache.put(key, decision)
    return result


def _cached_result(
    spec: LoopNestSpec,
    method: str,
    hit: CachedDecision,
    emit_ir: bool,
    settings: LoopTuneSettings,
    threads: int,
) -> ScheduleResult | None:
    """The answer a cached decision gives, or None where its schedule no longer checks (a cache written by
    another version of the backend: decide again)."""
    start = time.perf_counter()
    try:
        schedule = Schedule.from_text(hit.schedule)
        schedule.check(spec)
    except SpecError:
        return None
    compile_ms, ir_text = None, None
    if emit_ir:
        target = host_target(settings.max_kernel_statements)
        kernel = compile_parallel(spec, schedule, threads, target=target, keep_ir=True)
        compile_ms, ir_text = kernel.compile_seconds * 1e3, kernel.llvm_ir
        kernel.close()
    gflops, base = hit.gflops, hit.base_gflops
    return ScheduleResult(
        einsum=spec.text(),
        sizes=spec.size_of,
        method=method,
        schedule=schedule.text(),
        loop_order=[lp.index for lp in schedule.compute],
        loops=[asdict(lp) for lp in schedule.compute],
        writeback_loops=[asdict(lp) for lp in schedule.writeback],
        actions=list(hit.actions),
        gflops=gflops,
        base_gflops=base,
        speedup=gflops / base if gflops and base else None,
        seconds=time.perf_counter() - start,
        search_seconds=0.0,
        evaluations=0,
        compile_ms=compile_ms,
        mean_compile_ms=None,
        peak_gflops=None,
        timed_out=False,
        llvm_ir=ir_text,
        timed_sizes=hit.timed_sizes,
        threads=hit.threads,
        cached=True,
    )


def _schedule_nest(
    spec: LoopNestSpec,
    method: str,
    time_limit_s: float,
    measure: bool,
    emit_ir: bool,
    settings: LoopTuneSettings,
    threads: int,
) -> ScheduleResult:
    if method not in SEARCHES:
        raise SpecError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    if not 0 < time_limit_s <= settings.search_time_limit_s:
        raise SpecError(f"time limit must be in (0, {settings.search_time_limit_s}] seconds")
    prepare(method)  # what the method loads once (torch, the network) is not paid from its budget
    start = time.perf_counter()
    budget_start = clock.now()
    compile_log: list[float] = []
    compile_seconds: dict[str, float] = {}  # per compute nest: the chosen one's JIT time without recompiling
    quick = method in QUICK_METHODS
    budget = min(time_limit_s, settings.polish_time_s) if quick else time_limit_s
    # a timing that would end later than this is cut to one call (a scalar base of a large nest); the slack
    # lets one started near the budget's end finish: a cut, cold single call reads slow and loses
    cut_at = budget_start + budget * (1 + CUT_SLACK)

    finalists = Finalists() if quick else None

    def measure_fn(s: LoopNestSpec, schedule: Schedule) -> float:
        # until one schedule ran, none is cut short: the answer needs one timed in full, deadline or not
        cut = cut_at if any(evaluator.cache.values()) else None
        gflops = measure_schedule(s, schedule, settings, compile_log, quick, cut, threads, finalists)
        compile_seconds[schedule.compute_key()] = compile_log[-1]
        return gflops

    def rematch_fn(s: LoopNestSpec, schedules: list[Schedule], deadline: float) -> list[float]:
        assert finalists is not None
        again = finalists.rematch([x.compute_key() for x in schedules], deadline, settings)
        return [again.get(x.compute_key(), 0.0) for x in schedules]

    # candidates run on the request's threads, on a sub-problem of at most `timed_flops` a thread: each
    # thread's share of its grid about the whole's (256 x 2048 x 256 at 1 thread, 1024 x 2048 x 1024 on 16
    # for 2048^3), with the memory and caches shared as the whole will share them; timed on one thread, a
    # tile that led there lost on 16 (8x2rv-k256: 0.62-0.83x numpy in 5 of 6 such lent decisions)
    timed = timed_spec(spec, settings.timed_flops * threads)
    large = spec.flops > settings.timed_flops  # a large contraction: the wide tiles first (policies/tiles.py)
    evaluator = Evaluator(
        timed,
        measure_fn,
        whole=spec if large else None,
        rematch_fn=rematch_fn if finalists is not None else None,
        threads=threads,
    )
    base = Schedule.base(timed)
    timed_key = None  # the chosen schedule's on the timed contraction
    if method == SearchMethod.BASE and not measure:
        outcome_schedule, actions, gflops, timed_out = Schedule.base(spec), (), None, False
    else:
        try:
            outcome = run_search(method, evaluator, max(1e-3, budget - (clock.now() - budget_start)))
        finally:
            if finalists is not None:
                finalists.close()
        outcome_schedule, actions, gflops, timed_out = (
            outcome.state.schedule,
            outcome.actions,
            outcome.gflops,
            outcome.timed_out,
        )
        if measure and gflops is None:
            gflops = evaluator.gflops(outcome_schedule)
        timed_key = outcome_schedule.compute_key()
        if timed is not spec:
            outcome_schedule = replay(spec, actions, host_target(settings.max_kernel_statements), timed)
    search_seconds = time.perf_counter() - start
    base_gflops = evaluator.cache.get(base.compute_key())
    if measure and base_gflops is None and not quick:
        base_gflops = evaluator.gflops(base)
    compile_ms, ir_text = None, None
    if measure and not emit_ir and outcome_schedule.compute_key() in compile_seconds:
        compile_ms = compile_seconds[outcome_schedule.compute_key()] * 1e3
    elif measure and not emit_ir and timed is not spec:
        # decided on a sub-problem: the whole's kernel is not compiled (its JIT cost about a third of such a
        # decision on busy cores); the replayed schedule is checked to fit the code-size limit, and the JIT
        # time reported is the chosen schedule's on the sub-problem
        try:
            check_parallel(spec, outcome_schedule, threads, host_target(settings.max_kernel_statements))
            compile_ms = compile_seconds[timed_key] * 1e3 if timed_key in compile_seconds else None
        except SpecError:  # replayed on the whole, the tails made more code than the backend takes
            outcome_schedule, actions = Schedule.base(spec), ()
    elif emit_ir or measure or timed is not spec:
        target = host_target(settings.max_kernel_statements)
        try:
            kernel = compile_parallel(spec, outcome_schedule, threads, target=target, keep_ir=emit_ir)
        except SpecError:  # replayed on the whole, the tails made more code than the backend takes
            outcome_schedule, actions = Schedule.base(spec), ()
            kernel = compile_parallel(spec, outcome_schedule, threads, target=target, keep_ir=emit_ir)
        compile_ms = kernel.compile_seconds * 1e3
        ir_text = kernel.llvm_ir if emit_ir else None
        kernel.close()
    return ScheduleResult(
        einsum=spec.text(),
        sizes=spec.size_of,
        method=method,
        schedule=outcome_schedule.text(),
        loop_order=[lp.index for lp in outcome_schedule.compute],
        loops=[asdict(lp) for lp in outcome_schedule.compute],
        writeback_loops=[asdict(lp) for lp in outcome_schedule.writeback],
        actions=list(actions),
        gflops=gflops,
        base_gflops=base_gflops,
        speedup=gflops / base_gflops if gflops and base_gflops else None,
        seconds=time.perf_counter() - start,
        search_seconds=search_seconds,
        evaluations=evaluator.evaluations,
        compile_ms=compile_ms,
        mean_compile_ms=1e3 * sum(compile_log) / len(compile_log) if compile_log else None,
        peak_gflops=peak_gflops() if measure else None,
        timed_out=timed_out,
        llvm_ir=ir_text,
        timed_sizes=timed.size_of,
        threads=_threads_used(spec, outcome_schedule, threads),
    )


def _threads_used(spec: LoopNestSpec, schedule: Schedule, threads: int) -> int:
    """Threads the kernel of `schedule` runs on when `threads` are allowed (kernels/parallel.py)."""
    grid = plan_blocks(spec, schedule, threads)
    return grid.threads if grid else 1
