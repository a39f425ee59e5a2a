"""Each method's candidate pass lists for one function (drawn once at the largest n), and compiling them."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from optserve.passlm.evaluation.methods import RANDOM_MAX_PASSES, EvalConfig, Method, coreset_of


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
class Generated:
    pass_lists: list[tuple[str, ...]]
    predicted_before: list[int | None]
    predicted_after: list[int | None]
    seconds: float = 0.0
    skipped: str | None = None  # why the method produced nothing (e.g. the prompt is too long)
    deadline_hit: bool = False
    exhausted: bool = False  # fewer candidates exist than asked for (asking again would not give more)
    by_draws: dict[int, list[int]] | None = None  # nucleus: n draws -> indices of its unique candidates


async def generate(engine, ir: str, method: Method, config: EvalConfig, samples: int) -> Generated:
    from optserve.deadline import Deadline
    from optserve.engine.interface import PromptTooLongError, SamplingOptions

    options = SamplingOptions(
        strategy="priority" if method.kind == "ranked" else method.kind,
        samples=samples,
        top_k=config.top_k,
        parallel=config.parallel,
        temperature=method.temperature,
        top_p=config.top_p,
        seed=config.seed,
        deadline=None if config.deadline_s is None else Deadline.after(config.deadline_s),
        objective=config.objective,
        allowed_lists=coreset_of(config).first(config.objective, 100) if method.kind == "ranked" else None,
    )
    started = time.perf_counter()
    try:
        generation = await engine.generate(ir, options)
    except PromptTooLongError as err:
        return Generated([], [], [], time.perf_counter() - started, skipped=f"prompt too long: {err}")
    candidates = generation.candidates
    return Generated(
        [c.pass_list for c in candidates],
        [c.predicted_cost_before for c in candidates],
        [c.predicted_cost_after for c in candidates],
        time.perf_counter() - started,
        deadline_hit=generation.deadline_hit,
        exhausted=method.kind in ("priority", "ranked")
        and len(candidates) < samples
        and not generation.deadline_hit,
    )


async def generate_per_n(engine, ir: str, method: Method, config: EvalConfig) -> Generated:
    """Nucleus sampling: n draws for every n; the union of unique candidates, with each n's members."""
    merged = Generated([], [], [], by_draws={})
    index: dict[tuple[str, ...], int] = {}
    for n in config.samples:
        drawn = await generate(engine, ir, method, config, n)
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


async def compile_lists(pool, ir: str, pass_lists: list[tuple[str, ...]], objective: str):
    started = time.perf_counter()
    evaluations = await pool.evaluate_async(ir, pass_lists, objective) if pass_lists else []
    return evaluations, time.perf_counter() - started
