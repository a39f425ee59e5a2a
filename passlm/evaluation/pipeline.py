"""The run: every pending method on every selected function, journaled as each function finishes.

Generation of one function overlaps the compilation of the previous one; a time limit stops starting new
functions (the same command resumes from the journal).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from optserve.compiler.pipeline import OZ
from optserve.corpus.journal import Journal
from optserve.passlm.evaluation.candidates import (
    Generated,
    compile_lists,
    generate,
    generate_per_n,
    random_lists,
)
from optserve.passlm.evaluation.journal import (
    journal_key,
    journal_record,
    method_fingerprint,
    model_fingerprint,
    reusable,
)
from optserve.passlm.evaluation.methods import EvalConfig, coreset_of
from optserve.passlm.evaluation.metrics import FunctionCosts


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

        options = {"device": config.device} if config.backend == "torch" else {}
        engine = ModelEngine.load(config.model_dir, config.backend, **options)
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
    base_task = asyncio.create_task(compile_lists(pool, ir, [(), OZ], config.objective))
    runs = []
    async with generating:  # the next function waits for this one's generations, not its compilations
        for method in methods:
            if method.draws_per_n:
                generated = await generate_per_n(engine, ir, method, config)
            elif method.uses_model:
                generated = await generate(engine, ir, method, config, method.draws(config.max_samples))
            elif method.kind == "random":
                generated = Generated(random_lists(function["id"], config.seed, config.max_samples), [], [])
            elif method.kind == "coreset":
                lists = list(coreset_of(config).first(config.objective, config.max_samples))
                generated = Generated(lists, [], [], exhausted=len(lists) < config.max_samples)
            else:  # the autotuner: its label's best, no compilation
                generated = Generated([], [], [])
            compile_task = asyncio.create_task(
                compile_lists(pool, ir, generated.pass_lists, config.objective)
            )
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
        record = journal_record(
            function, method, fingerprints[method.name], generated, await compile_task, base, config
        )
        if method.kind == "autotuner":
            label = function["labels"][config.objective]
            record |= {"costs": [label["best"]], "best_pass_list": " ".join(label["pass_list"])}
            record |= {"compilations": label["compilations"], "exhausted": True}
        records.append(record)
    return records
