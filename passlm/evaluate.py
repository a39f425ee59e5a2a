"""`optserve eval passes`: a pass-ordering model measured the way the thesis measures it (ch. 4, Table 6.1).

For every labelled function of a split, each method yields an ordered list of candidate pass lists, drawn
once at the largest sample count N (priority sampling is deterministic; nucleus draws and random lists use
fixed seeds), and every candidate is compiled. The metrics at n samples then read the first n candidates:

- improvement over -Oz: sum over functions of (oz_cost - best cost among the first n) / sum of oz_cost, in %.
  Without backup a function with no compiling candidate keeps its unoptimized cost; with backup the -Oz
  candidate is included (best = min(best, oz_cost)), so nothing regresses.
- functions improved / regressed (best < / > oz_cost, without backup);
- validity: the share of candidates that compile;
- MAPE of the instruction counts the model writes: "before" against the unoptimized count, "after" against
  the measured cost of that same pass list.

n counts samples as the thesis does: priority sampling's first n (unique) samples, random lists' first n
(unique) lists, nucleus sampling's unique candidates among n draws (drawn for each n, with the same seed).
The autotuner row is the label's best cost.

Per (function, method) results are journaled as they finish, with a fingerprint of what produced them (model
weights, method, seeds, objective), so a killed run resumes without repeating finished work and a changed
model never mixes with old results. Generation of one function overlaps the compilation of the previous one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from optserve.corpus.journal import Journal

# "ranked": priority sampling restricted to the coreset's lists (the service's strategy ranked_coreset)
MODEL_STRATEGIES = ("greedy", "priority", "nucleus", "ranked")
DEFAULT_METHODS = "greedy,priority,nucleus-0.8,nucleus-1.2,random,autotuner"
DEFAULT_SAMPLES = (1, 3, 5, 10, 30, 100)
OZ = ("-Oz",)
RANDOM_MAX_PASSES = 8  # as the autotuner draws them (optserve.compiler.autotune)


# --- methods ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One row family of the table: greedy, priority, nucleus-T (temperature T), random, coreset,
    autotuner."""

    name: str
    kind: str
    temperature: float = 1.0

    @classmethod
    def parse(cls, name: str) -> Method:
        kind, _, suffix = name.partition("-")
        if kind == "nucleus":
            try:
                temperature = float(suffix)
            except ValueError:
                raise ValueError(f"nucleus needs a temperature, e.g. nucleus-1.2 (got {name!r})") from None
            if temperature <= 0:
                raise ValueError(f"{name}: the temperature must be > 0")
            return cls(name, kind, temperature)
        if suffix or kind not in (*MODEL_STRATEGIES, "random", "coreset", "autotuner"):
            raise ValueError(
                f"unknown method {name!r}: choose from greedy, priority, nucleus-T, ranked, random, coreset, "
                "autotuner"
            )
        return cls(name, kind)

    @property
    def uses_model(self) -> bool:
        return self.kind in MODEL_STRATEGIES

    @property
    def single_answer(self) -> bool:
        return self.kind in ("greedy", "autotuner")

    def sample_counts(self, samples: Sequence[int]) -> tuple[int, ...]:
        """The n this method is reported at: greedy and the autotuner have one answer."""
        return (1,) if self.single_answer else tuple(samples)

    def draws(self, max_samples: int) -> int:
        """Candidates to draw (once, for every n)."""
        return 1 if self.single_answer else max_samples

    @property
    def draws_per_n(self) -> bool:
        """Nucleus sampling at n is n draws, of which the unique ones count (thesis): the engine returns
        unique candidates, not draws, and draws of different counts are not prefixes of each other, so each
        n is drawn on its own (with the same seed)."""
        return self.kind == "nucleus"


def parse_methods(text: str) -> tuple[Method, ...]:
    methods = tuple(Method.parse(name.strip()) for name in text.split(",") if name.strip())
    if not methods:
        raise ValueError("no methods given")
    if len({m.name for m in methods}) != len(methods):
        raise ValueError("a method is named twice")
    return methods


def parse_samples(text: str) -> tuple[int, ...]:
    try:
        samples = tuple(sorted({int(n) for n in text.split(",") if n.strip()}))
    except ValueError:
        raise ValueError(f"--samples takes comma-separated counts, e.g. 1,3,10 (got {text!r})") from None
    if not samples or samples[0] < 1:
        raise ValueError("sample counts must be >= 1")
    return samples


@dataclass(frozen=True)
class EvalConfig:
    model_dir: Path
    corpus_dir: Path
    journal_path: Path
    split: str = "test"
    limit: int | None = None  # the first N labelled functions of the split, in id (content hash) order
    samples: tuple[int, ...] = DEFAULT_SAMPLES
    methods: tuple[Method, ...] = field(default_factory=lambda: parse_methods(DEFAULT_METHODS))
    backend: str = "torch"
    objective: str = "instruction_count"
    workers: int = 2  # compiler processes
    candidate_timeout_s: float = 20.0
    deadline_s: float | None = None  # generation budget per function and method
    time_limit_s: float | None = None  # stop starting functions after this long (resume later)
    seed: int = 0
    top_k: int = 5  # priority sampling K
    top_p: float = 1.0  # nucleus sampling
    parallel: int = 1  # priority sampling: queue heads per batch (1 = Algorithm 1)
    coreset_path: Path | None = None  # method coreset: the pass-list coreset the service serves

    @property
    def max_samples(self) -> int:
        return max(self.samples)


# --- metrics (pure) --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodResult:
    """One method on one function: its candidates in order (cost None = did not compile)."""

    costs: tuple[int | None, ...]
    predicted_before: tuple[int | None, ...] = ()
    predicted_after: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class FunctionCosts:
    unoptimized: int
    oz: int


@dataclass(frozen=True)
class Row:
    method: str
    samples: int
    functions: int
    improvement: float  # % of the -Oz total saved, without -Oz backup
    improvement_with_oz: float  # ... with the -Oz candidate included
    improved: int
    regressed: int
    validity: float | None  # % of candidates that compile (None: no candidates)
    mape_before: float | None  # % error of the predicted unoptimized count
    mape_after: float | None  # % error of the predicted optimized count
    candidates: float  # mean candidates per function among the first n


def best_cost(function: FunctionCosts, result: MethodResult, n: int, with_oz: bool) -> int:
    """The best cost among the first n candidates; no compiling candidate leaves the IR unoptimized."""
    compiled = [c for c in result.costs[:n] if c is not None]
    best = min(compiled) if compiled else function.unoptimized
    return min(best, function.oz) if with_oz else best


def _mape(pairs: Iterable[tuple[int, int]]) -> float | None:
    errors = [abs(predicted - actual) / max(actual, 1) for predicted, actual in pairs]
    return 100 * sum(errors) / len(errors) if errors else None


def summarize(
    method: str,
    n: int,
    functions: Sequence[FunctionCosts],
    results: Sequence[MethodResult],
) -> Row:
    """The thesis' metrics of one method at n samples over functions (results[i] belongs to functions[i])."""
    oz_total = sum(f.oz for f in functions)
    without = [best_cost(f, r, n, with_oz=False) for f, r in zip(functions, results, strict=True)]
    with_oz = [best_cost(f, r, n, with_oz=True) for f, r in zip(functions, results, strict=True)]
    candidates = [c for r in results for c in r.costs[:n]]
    before, after = [], []
    for function, result in zip(functions, results, strict=True):
        for i, cost in enumerate(result.costs[:n]):
            if i < len(result.predicted_before) and result.predicted_before[i] is not None:
                before.append((result.predicted_before[i], function.unoptimized))
            if cost is not None and i < len(result.predicted_after) and result.predicted_after[i] is not None:
                after.append((result.predicted_after[i], cost))
    percent = (lambda saved: 100 * saved / oz_total) if oz_total else (lambda saved: 0.0)
    return Row(
        method=method,
        samples=n,
        functions=len(functions),
        improvement=percent(sum(f.oz - b for f, b in zip(functions, without, strict=True))),
        improvement_with_oz=percent(sum(f.oz - b for f, b in zip(functions, with_oz, strict=True))),
        improved=sum(b < f.oz for f, b in zip(functions, without, strict=True)),
        regressed=sum(b > f.oz for f, b in zip(functions, without, strict=True)),
        validity=100 * sum(c is not None for c in candidates) / len(candidates) if candidates else None,
        mape_before=_mape(before),
        mape_after=_mape(after),
        candidates=len(candidates) / len(functions) if functions else 0.0,
    )


# --- journal records -------------------------------------------------------------------------------------


def model_fingerprint(model_dir: Path) -> str:
    """What identifies a model's behaviour: its profile, config, tokenizer and weights."""
    digest = hashlib.sha256()
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.suffix in (".json", ".safetensors", ".model", ".txt"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def method_fingerprint(config: EvalConfig, method: Method, model: str | None) -> str:
    """Everything but the sample count that decides a method's candidates (results at a larger N serve a
    smaller one: candidates are drawn in the same order)."""
    settings: dict[str, Any] = {"method": method.name, "objective": config.objective}
    if method.uses_model:
        settings |= {"model": model, "deadline_s": config.deadline_s}
    if method.kind in ("priority", "ranked"):
        settings |= {"top_k": config.top_k, "parallel": config.parallel}
    if method.kind == "nucleus":
        settings |= {"top_p": config.top_p, "seed": config.seed, "draws": "per n"}
    if method.kind == "random":
        settings |= {"seed": config.seed, "max_passes": RANDOM_MAX_PASSES}
    if method.kind in ("coreset", "ranked"):
        settings |= {"coreset": _coreset(config).version}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def journal_key(function_id: str, method: str) -> str:
    return f"{function_id}/{method}"


def reusable(record: dict[str, Any] | None, fingerprint: str, method: Method, samples: Sequence[int]) -> bool:
    """A journaled result answers this run if made the same way with at least as many samples."""
    if record is None or record["fingerprint"] != fingerprint:
        return False
    if method.draws_per_n:
        return {str(n) for n in samples} <= set(record["by_draws"] or ())
    return record["samples"] >= method.draws(max(samples)) or record["exhausted"]


def result_at(record: dict[str, Any], n: int) -> MethodResult:
    """A journaled method result as read at n samples (prefixes are taken by `summarize`)."""
    chosen = record["by_draws"][str(n)] if record.get("by_draws") else range(len(record["costs"]))

    def pick(values: list) -> tuple:
        return tuple(values[i] if i < len(values) else None for i in chosen)

    return MethodResult(
        pick(record["costs"]), pick(record["predicted_before"]), pick(record["predicted_after"])
    )


# --- candidates of one function --------------------------------------------------------------------------


_UNITS = {"instruction_count": "instructions", "text_size": "bytes of .text"}


def _coreset(config: EvalConfig):
    """The coreset (loaded once per path), as `strategy coreset` serves it: its first n lists, in order."""
    from optserve.engine.coreset import Coreset

    if config.coreset_path is None:
        raise ValueError("method coreset needs a coreset file")
    if config.coreset_path not in _CORESETS:
        _CORESETS[config.coreset_path] = Coreset.load(config.coreset_path)
    return _CORESETS[config.coreset_path]


_CORESETS: dict[Path, Any] = {}


def random_lists(function_id: str, seed: int, count: int) -> list[tuple[str, ...]]:
    """`count` unique random pass lists, the same for a function and seed on every run."""
    from optserve.compiler.autotune import random_pass_list

    rng = random.Random(f"{seed}:{function_id}")
    lists: dict[tuple[str, ...], None] = {}
    for _ in range(100 * count):
        if len(lists) == count:
            break
        lists.setdefault(random_pass_list(rng, RANDOM_MAX_PASSES), None)
    return list(lists)


@dataclass
class _Generated:
    pass_lists: list[tuple[str, ...]]
    predicted_before: list[int | None]
    predicted_after: list[int | None]
    seconds: float = 0.0
    skipped: str | None = None  # why the method produced nothing (e.g. the prompt is too long)
    deadline_hit: bool = False
    exhausted: bool = False  # fewer candidates exist than asked for (asking again would not give more)
    by_draws: dict[int, list[int]] | None = None  # nucleus: n draws -> indices of its unique candidates


async def _generate(engine, ir: str, method: Method, config: EvalConfig, samples: int) -> _Generated:
    from optserve.engine.engine import PromptTooLongError
    from optserve.engine.interface import SamplingOptions

    options = SamplingOptions(
        strategy="priority" if method.kind == "ranked" else method.kind,
        samples=samples,
        top_k=config.top_k,
        parallel=config.parallel,
        temperature=method.temperature,
        top_p=config.top_p,
        seed=config.seed,
        deadline_s=config.deadline_s,
        objective=config.objective,
        allowed_lists=_coreset(config).first(config.objective, 100) if method.kind == "ranked" else None,
    )
    started = time.perf_counter()
    try:
        generation = await engine.generate(ir, options)
    except PromptTooLongError as err:
        return _Generated([], [], [], time.perf_counter() - started, skipped=f"prompt too long: {err}")
    candidates = generation.candidates
    return _Generated(
        [c.pass_list for c in candidates],
        [c.predicted_cost_before for c in candidates],
        [c.predicted_cost_after for c in candidates],
        time.perf_counter() - started,
        deadline_hit=generation.deadline_hit,
        exhausted=method.kind in ("priority", "ranked")
        and len(candidates) < samples
        and not generation.deadline_hit,
    )


async def _generate_per_n(engine, ir: str, method: Method, config: EvalConfig) -> _Generated:
    """Nucleus sampling: n draws for every n; the union of unique candidates, with each n's members."""
    merged = _Generated([], [], [], by_draws={})
    index: dict[tuple[str, ...], int] = {}
    for n in config.samples:
        drawn = await _generate(engine, ir, method, config, n)
        merged.seconds += drawn.seconds
        merged.deadline_hit |= drawn.deadline_hit
        if drawn.skipped:
            merged.skipped = drawn.skipped
            break
        members = []
        for pass_list, before, after in zip(
            drawn.pass_lists, drawn.predicted_before, drawn.predicted_after, strict=True
        ):
            if pass_list not in index:
                index[pass_list] = len(merged.pass_lists)
                merged.pass_lists.append(pass_list)
                merged.predicted_before.append(before)
                merged.predicted_after.append(after)
            members.append(index[pass_list])
        merged.by_draws[n] = members
    return merged


async def _compile(pool, ir: str, pass_lists: list[tuple[str, ...]], objective: str):
    started = time.perf_counter()
    evaluations = await pool.evaluate_async(ir, pass_lists, objective) if pass_lists else []
    return evaluations, time.perf_counter() - started


def _record(function: dict, method: Method, fingerprint: str, generated: _Generated, compiled, base, config):
    evaluations, compile_seconds = compiled
    costs = [e.cost for e in evaluations]
    errors = [e.error for e in evaluations if e.error]
    ok = [(e.cost, e.pass_list) for e in evaluations if e.cost is not None]
    return {
        "key": journal_key(function["id"], method.name),
        "function": function["id"],
        "method": method.name,
        "fingerprint": fingerprint,
        "samples": method.draws(config.max_samples),
        "unoptimized": base.unoptimized,
        "oz": base.oz,
        "costs": costs,
        "predicted_before": generated.predicted_before,
        "predicted_after": generated.predicted_after,
        "best_pass_list": " ".join(min(ok)[1]) if ok else None,
        "failed": len(errors),
        "first_error": errors[0][:300] if errors else None,
        "skipped": generated.skipped,
        "deadline_hit": generated.deadline_hit,
        "exhausted": generated.exhausted,
        "by_draws": {str(n): m for n, m in generated.by_draws.items()}
        if generated.by_draws is not None
        else None,
        "generate_s": round(generated.seconds, 4),
        "compile_s": round(compile_seconds, 4),
    }


# --- the driver ------------------------------------------------------------------------------------------


@dataclass
class RunSummary:
    functions: int  # selected
    done_before: int  # (function, method) results reused from the journal
    computed: int  # computed in this run
    seconds: float
    stopped_early: bool = False


def select_functions(config: EvalConfig) -> list[dict[str, Any]]:
    """The first `limit` labelled functions of the split in id order, with the label of the objective.

    Ids are content hashes, so any prefix spreads over packages and sources (shards hold one package each).
    """

    from optserve.corpus.label import iter_labelled
    from optserve.corpus.layout import CorpusLayout

    layout = CorpusLayout(config.corpus_dir)
    if not layout.shards((config.split,)):
        raise ValueError(f"no {config.split} shards under {layout.examples_dir}")
    labelled = (e for e in iter_labelled(layout, (config.split,)) if config.objective in e["labels"])
    functions = sorted(labelled, key=lambda e: e["id"])[: config.limit]
    if not functions:
        raise ValueError(
            f"no {config.split} function of {config.corpus_dir} is labelled for {config.objective}"
        )
    return functions


def run(
    config: EvalConfig,
    functions: Sequence[dict[str, Any]],
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> RunSummary:
    """Evaluate every method on every function not already in the journal."""
    started = time.monotonic()
    needs_model = any(m.uses_model for m in config.methods)
    model = model_fingerprint(config.model_dir) if needs_model else None
    fingerprints = {m.name: method_fingerprint(config, m, model) for m in config.methods}
    journal = Journal(config.journal_path)
    done = journal.records()
    todo = {
        f["id"]: [
            m
            for m in config.methods
            if not reusable(done.get(journal_key(f["id"], m.name)), fingerprints[m.name], m, config.samples)
        ]
        for f in functions
    }
    pending = [f for f in functions if todo[f["id"]]]
    reused = sum(len(config.methods) - len(todo[f["id"]]) for f in functions)
    if not pending:
        return RunSummary(len(functions), reused, 0, time.monotonic() - started)
    engine_needed = any(m.uses_model for f in pending for m in todo[f["id"]])
    try:
        stopped, computed = asyncio.run(
            _run(config, pending, todo, fingerprints, journal, engine_needed, progress)
        )
    finally:
        journal.close()
    if stopped:
        log(f"time limit reached after {computed} results; run the same command again to resume")
    return RunSummary(len(functions), reused, computed, time.monotonic() - started, stopped)


async def _run(config, functions, todo, fingerprints, journal, engine_needed, progress) -> tuple[bool, int]:
    from tqdm import tqdm

    from optserve.compiler.workers import CompilerPool

    engine = None
    if engine_needed:
        from optserve.engine.engine import ModelEngine

        engine = ModelEngine.load(config.model_dir, config.backend)
    pool = CompilerPool(config.workers, timeout_s=config.candidate_timeout_s)
    deadline = time.monotonic() + config.time_limit_s if config.time_limit_s else None
    bar = tqdm(total=len(functions), unit="fn", disable=not progress, smoothing=0.1, desc="eval passes")
    slots = asyncio.Semaphore(2)  # one function generating while the previous one compiles
    generating = asyncio.Lock()  # the engine runs one generation at a time: timings stay per method
    counts = {"computed": 0}
    stopped = False

    async def evaluate_and_journal(function: dict[str, Any]) -> None:
        try:
            records = await _evaluate_function(engine, pool, generating, function, todo[function["id"]],
                                               fingerprints, config)  # fmt: skip
            _journal_results(records, journal, bar, counts)
        finally:
            slots.release()

    in_flight: list[asyncio.Task] = []
    try:
        for function in functions:
            if deadline is not None and time.monotonic() >= deadline:
                stopped = True
                break
            await slots.acquire()
            in_flight.append(asyncio.create_task(evaluate_and_journal(function)))
            for task in [t for t in in_flight if t.done()]:
                task.result()  # a failure surfaces now, not at the end
                in_flight.remove(task)
        await asyncio.gather(*in_flight)
    finally:
        for task in in_flight:
            task.cancel()
        bar.close()
        pool.close()
        if engine is not None:
            await engine.close()
    return stopped, counts["computed"]


def _journal_results(records: list[dict[str, Any]], journal: Journal, bar, counts: dict[str, int]) -> None:
    for record in records:
        journal.append(record)
    counts["computed"] += len(records)
    bar.update()
    bar.set_postfix({r["method"]: f"{r['generate_s'] + r['compile_s']:.1f}s" for r in records}, refresh=False)


async def _evaluate_function(
    engine, pool, generating: asyncio.Lock, function, methods, fingerprints, config
) -> list[dict[str, Any]]:
    """Every pending method on one function: generation in order, compilations overlapping it."""
    ir = function["ir"]
    base_task = asyncio.create_task(_compile(pool, ir, [(), OZ], config.objective))
    runs = []
    async with generating:  # the next function waits for this one's generations, not its compilations
        for method in methods:
            if method.draws_per_n:
                generated = await _generate_per_n(engine, ir, method, config)
            elif method.uses_model:
                generated = await _generate(engine, ir, method, config, method.draws(config.max_samples))
            elif method.kind == "random":
                generated = _Generated(random_lists(function["id"], config.seed, config.max_samples), [], [])
            elif method.kind == "coreset":
                lists = list(_coreset(config).first(config.objective, config.max_samples))
                generated = _Generated(lists, [], [], exhausted=len(lists) < config.max_samples)
            else:  # the autotuner: its label's best, no compilation
                generated = _Generated([], [], [])
            compile_task = asyncio.create_task(_compile(pool, ir, generated.pass_lists, config.objective))
            runs.append((method, generated, compile_task))
    (unoptimized, oz), _ = await base_task
    if unoptimized.cost is None or oz.cost is None:
        error = unoptimized.error or oz.error
        base = FunctionCosts(-1, -1)
        for _, generated, _ in runs:
            generated.skipped = f"does not compile at -O0/-Oz: {error}"
    else:
        base = FunctionCosts(unoptimized.cost, oz.cost)
    records = []
    for method, generated, compile_task in runs:
        record = _record(
            function, method, fingerprints[method.name], generated, await compile_task, base, config
        )
        if method.kind == "autotuner":
            label = function["labels"][config.objective]
            record |= {"costs": [label["best"]], "best_pass_list": " ".join(label["pass_list"])}
            record |= {"compilations": label["compilations"], "exhausted": True}
        records.append(record)
    return records


# --- results ---------------------------------------------------------------------------------------------


def collect(config: EvalConfig, functions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows of the table (and timings) from the journal, over the functions every method could run on."""
    needs_model = any(m.uses_model for m in config.methods)
    model = model_fingerprint(config.model_dir) if needs_model else None
    done = Journal(config.journal_path).records(repair=False)
    per_method: dict[str, list[dict[str, Any]]] = {m.name: [] for m in config.methods}
    kept: list[FunctionCosts] = []
    skipped: dict[str, int] = {}
    missing = 0
    for function in functions:
        records = {m.name: done.get(journal_key(function["id"], m.name)) for m in config.methods}
        if not all(
            reusable(r, method_fingerprint(config, m, model), m, config.samples)
            for m, r in zip(config.methods, records.values(), strict=True)
        ):
            missing += 1
            continue
        reasons = [r["skipped"] for r in records.values() if r["skipped"]]
        if reasons:
            reason = reasons[0].split(":")[0]
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        first = next(iter(records.values()))
        kept.append(FunctionCosts(first["unoptimized"], first["oz"]))
        for name, record in records.items():
            per_method[name].append(record)
    rows = []
    for method in config.methods:
        for n in method.sample_counts(config.samples):
            results = [result_at(r, n) for r in per_method[method.name]]
            rows.append(asdict(summarize(method.name, n, kept, results)))
    timings = {m.name: _timing(per_method[m.name]) for m in config.methods if per_method[m.name]}
    return {
        "functions": len(kept),
        "selected": len(functions),
        "not_evaluated_yet": missing,
        "excluded": skipped,
        "oz_total": sum(f.oz for f in kept),
        "unoptimized_total": sum(f.unoptimized for f in kept),
        "rows": rows,
        "timings": timings,
        "autotuner_compilations": _mean(r.get("compilations", 0) for r in per_method.get("autotuner", [])),
    }


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _timing(records: list[dict[str, Any]]) -> dict[str, Any]:
    totals = sorted(r["generate_s"] + r["compile_s"] for r in records)
    return {
        "generate_s": _mean(r["generate_s"] for r in records),
        "compile_s": _mean(r["compile_s"] for r in records),
        "total_median_s": totals[len(totals) // 2],
        "total_p90_s": totals[min(len(totals) - 1, int(0.9 * len(totals)))],
        "total_max_s": totals[-1],
        "candidates": _mean(len(r["costs"]) for r in records),
        "no_candidate": sum(not r["costs"] for r in records),
        "deadline_hits": sum(r["deadline_hit"] for r in records),
    }


def machine_description() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def _cell(value: float | None, digits: int = 2, suffix: str = "%") -> str:
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def report(data: dict[str, Any], plot_path: str | None = None) -> str:
    """The markdown report: Table 6.1 of the thesis as rows method@n, plus timings and definitions."""
    meta, results = data["meta"], data["results"]
    excluded = ", ".join(f"{count} {reason}" for reason, count in results["excluded"].items()) or "none"
    lines = [
        "# Pass-ordering model: evaluation (thesis Table 6.1)",
        "",
        f"- Command: `{meta['command']}`",
        f"- Machine: {meta['machine']}",
        f"- Date: {meta['date']}",
        f"- Model: `{meta['model_dir']}` ({meta['model_id']}, fingerprint {meta['model_fingerprint']}), "
        f"backend {meta['backend']}",
        f"- Corpus: `{meta['corpus_dir']}`, split {meta['split']}, objective {meta['objective']}; "
        f"{results['functions']} functions evaluated of {results['selected']} selected "
        f"(excluded: {excluded}; not evaluated yet: {results['not_evaluated_yet']})",
        f"- -Oz total {results['oz_total']} {_UNITS.get(meta['objective'], '')}, unoptimized total "
        f"{results['unoptimized_total']}",
        f"- This run: {meta['run']['computed']} (function, method) results computed in "
        f"{meta['run']['seconds']:.0f} s ({meta['run']['reused']} reused from the journal)",
        "",
        "| method@n | improvement over -Oz | with -Oz backup | improved | regressed | validity "
        "| MAPE before | MAPE after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    autotuner_budget = results.get("autotuner_compilations")
    for row in results["rows"]:
        name = f"{row['method']}@{row['samples']}"
        if row["method"] == "autotuner" and autotuner_budget:
            name = f"autotuner ({autotuner_budget:.0f} compilations)"
        lines.append(
            f"| {name} | {row['improvement']:.2f}% | {row['improvement_with_oz']:.2f}% "
            f"| {row['improved']} | {row['regressed']} | {_cell(row['validity'], 1)} "
            f"| {_cell(row['mape_before'], 1)} | {_cell(row['mape_after'], 1)} |"
        )
    lines += [
        "",
        "Wall time per function (generation once at the largest n, then compiling every candidate; "
        "generate/compile: means; total = generate + compile per function; compilation overlaps the next "
        "function's generation):",
        "",
        "| method | generate s | compile s | total s median | p90 | max | candidates | no candidate "
        "| deadline hit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, timing in results["timings"].items():
        lines.append(
            f"| {name} | {timing['generate_s']:.3f} | {timing['compile_s']:.3f} "
            f"| {timing['total_median_s']:.3f} | {timing['total_p90_s']:.3f} | {timing['total_max_s']:.3f} "
            f"| {timing['candidates']:.1f} | {timing['no_candidate']} | {timing['deadline_hits']} |"
        )
    lines += [
        "",
        "Improvement: sum over functions of (-Oz cost - best cost among the first n candidates) / sum of -Oz "
        "costs. Without backup a function with no compiling candidate counts at its unoptimized cost; with "
        "backup the -Oz candidate is included, so nothing regresses. n: priority sampling's first n "
        "samples, random's first n lists, nucleus' unique candidates among n draws (drawn per n). "
        "Improved/regressed: functions better/worse than -Oz without backup. Validity: share of candidates "
        "that compile. MAPE: the instruction counts the model writes, before vs the unoptimized count, "
        "after vs the measured cost of that pass list. Autotuner: the label's best "
        "cost. No candidate: functions where the method returned no pass list.",
    ]
    if plot_path:
        lines += ["", f"![improvement vs samples]({Path(plot_path).name})"]
    return "\n".join(lines) + "\n"


def plot(data: dict[str, Any], path: str | Path) -> None:
    """Improvement over -Oz vs samples, one line per method (log x); SVG or PNG by the file suffix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text stays text: a small SVG
    rows = data["results"]["rows"]
    samples = sorted({r["samples"] for r in rows})
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    colors = plt.get_cmap("tab10").colors
    for index, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
        own = [r for r in rows if r["method"] == method]
        color = colors[index % len(colors)]
        if len(own) == 1:  # greedy and the autotuner: one answer, drawn across
            value = own[0]["improvement"]
            axis.axhline(value, color=color, linestyle=":", linewidth=1.2, label=f"{method} ({value:.2f}%)")
            continue
        x = [r["samples"] for r in own]
        axis.plot(x, [r["improvement"] for r in own], color=color, marker="o", markersize=3, label=method)
        axis.plot(x, [r["improvement_with_oz"] for r in own], color=color, linestyle="--", linewidth=0.8)
    axis.plot([], [], color="gray", linestyle="--", linewidth=0.8, label="dashed: with -Oz backup")
    axis.axhline(0, color="black", linewidth=0.6)
    axis.set_xscale("log")
    axis.set_xticks(samples, [str(n) for n in samples])
    axis.set_xlabel("samples n")
    axis.set_ylabel("improvement over -Oz [%]")
    axis.set_title(
        f"{data['meta']['model_id']} on {data['results']['functions']} {data['meta']['split']} functions"
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Date": None} if str(path).endswith(".svg") else None)
    plt.close(figure)


def model_id(model_dir: Path) -> str:
    from optserve.engine.profile import ModelProfile

    return ModelProfile.load(model_dir).model_id
