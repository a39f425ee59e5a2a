"""Label corpus functions with the thesis' autotuner (§4.3.2): per-function search, then broadcast.

Stage `autotune`: for every function and objective, `optserve.compiler.autotune.autotune` (random search
under a compile budget, -Oz as the floor, then minimization). Stage `broadcast`: within each split, every
unique best pass list found by the autotuner is tried on every labelled function of that split and the best
is kept (within a split, so no training label is derived from an evaluation function).

Both stages run one task per function on a `Runner` (process pool, or Ray tasks). Inside a task the
candidates compile in a one-process `CompilerPool` owned by the task's worker process (reused across tasks),
so a pass that aborts LLVM or runs away costs one candidate, not the function. Output is one label shard per
examples shard; finished functions are journaled (fsync) as they arrive, so a killed run resumes without
losing or repeating finished functions, and a shard is written atomically once all its functions are done.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from optserve.compiler.pipeline import OZ
from optserve.corpus.journal import Journal, read_jsonl, write_atomic, write_jsonl_atomic
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.parallel import Runner, TaskFailure
from optserve.objectives import OBJECTIVE_NAMES

OBJECTIVES = OBJECTIVE_NAMES  # a function is labelled for each, in this order
STAGES = ("autotune", "broadcast", "local", "measure")


@dataclass(frozen=True)
class LabelConfig:
    budget: int = 1000  # autotuner compilations per function and objective
    objectives: tuple[str, ...] = OBJECTIVES
    candidate_timeout_s: float = 20.0  # one candidate's compile (a runaway pass is cut off)
    function_time_limit_s: float | None = None  # search time per function and objective
    broadcast_lists: int = 0  # 0: every unique best list; K: the K lists that were best most often
    limit_per_shard: int | None = None  # label only the first N functions of each shard (samples)
    seeds: tuple[tuple[str, ...], ...] = ()  # stage `local`: lists tried first (a coreset), in this order
    top_k: int = 5  # stage `local`: distinct best lists kept per label


@dataclass
class LabelSummary:
    stage: str
    functions: int = 0  # labelled in this run
    skipped: int = 0  # already done before this run
    failed: int = 0
    compilations: int = 0
    seconds: float = 0.0
    shards_completed: list[str] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def compilations_per_second(self) -> float:
        return self.compilations / self.seconds if self.seconds else 0.0


# --- the work of one function (runs in a worker process) -------------------------------------------------

_POOL = None  # this worker process's CompilerPool


def _compiler_pool(candidate_timeout_s: float):
    global _POOL
    if _POOL is None:
        from optserve.compiler.workers import CompilerPool

        _POOL = CompilerPool(1, timeout_s=candidate_timeout_s)
    return _POOL


def function_seed(example_id: str) -> int:
    return int(example_id[:8], 16)


def autotune_function(task: tuple[dict[str, Any], LabelConfig]) -> dict[str, Any]:
    """The autotuner's result for one example per objective (an `error` record if it cannot compile)."""
    from optserve.compiler.autotune import autotune

    def search(example: dict[str, Any], objective: str, config: LabelConfig) -> dict[str, Any]:
        result = autotune(
            example["ir"],
            budget=config.budget,
            objective=objective,
            time_limit_s=config.function_time_limit_s,
            seed=function_seed(example["id"]),
            pool=_compiler_pool(config.candidate_timeout_s),
        )
        return _label_fields(result)

    return _label_each_objective(task, search)


def local_search_function(task: tuple[dict[str, Any], LabelConfig]) -> dict[str, Any]:
    """Stage `local`: `compiler.autotune.local_search` from the seed lists, per objective."""
    from llvmlite import binding

    from optserve.compiler.autotune import local_search

    llvm = ".".join(map(str, binding.llvm_version_info))

    def search(example: dict[str, Any], objective: str, config: LabelConfig) -> dict[str, Any]:
        result = local_search(
            example["ir"],
            budget=config.budget,
            objective=objective,
            seeds=config.seeds,
            seed=function_seed(example["id"]),
            pool=_compiler_pool(config.candidate_timeout_s),
            top_k=config.top_k,
            time_limit_s=config.function_time_limit_s,
        )
        return {
            **_label_fields(result),
            "top": [[cost, list(pass_list)] for cost, pass_list in result.top],
            "seeds": seeds_fingerprint(config.seeds),
            "seed_costs": list(result.seed_costs),
            "search": result.version,
            "budget": config.budget,
            "llvm": llvm,
        }

    return _label_each_objective(task, search)


def measure_function(task: tuple[dict[str, Any], LabelConfig]) -> dict[str, Any]:
    """Stage `measure`: the cost of -Oz and of every seed list (a coreset), per objective; no search.

    A coreset chosen after a function was labelled was never measured on it in full; these costs let the
    training examples answer with the coreset list that is best for the function (Coreset-NVP's target).
    """
    example, config = task
    fingerprint = seeds_fingerprint(config.seeds)

    def measure(example: dict[str, Any], objective: str, config: LabelConfig) -> dict[str, Any]:
        pool = _compiler_pool(config.candidate_timeout_s)
        evaluations = pool.evaluate(example["ir"], [OZ, *config.seeds], objective)
        return {
            "oz": evaluations[0].cost,
            "seeds": fingerprint,
            "seed_costs": [e.cost for e in evaluations[1:]],
            "compilations": len(evaluations),
            "failed": sum(e.cost is None for e in evaluations),
        }

    return _label_each_objective((example, config), measure)


def _label_fields(result) -> dict[str, Any]:
    return {
        "unoptimized": result.unoptimized_cost,
        "oz": result.oz_cost,
        "best": result.best_cost,
        "pass_list": list(result.best_pass_list),
        "compilations": result.compilations,
        "failed": result.failed_compilations,
        "seconds": round(result.seconds, 3),
    }


def _label_each_objective(task: tuple[dict[str, Any], LabelConfig], search) -> dict[str, Any]:
    """{key, split, source, objective: search(...)} for every objective; an `error` record if one fails."""
    from optserve.compiler.ir import IRError

    example, config = task
    record: dict[str, Any] = {"key": example["id"], "split": example["split"], "source": example["source"]}
    for objective in config.objectives:
        try:
            record[objective] = search(example, objective, config)
        except IRError as err:
            return {**record, "error": f"{objective}: {err}"}
    return record


def seeds_fingerprint(seeds: Iterable[Iterable[str]]) -> str:
    """Names a seed-list set, so labels say which coreset they started from."""
    return hashlib.sha256(json.dumps([list(s) for s in seeds]).encode()).hexdigest()[:12]


def broadcast_function(task: tuple[dict[str, Any], dict[str, Any], dict[str, list[list[str]]], LabelConfig]):
    """Try every broadcast list on one function; keep the autotuner's list unless one is strictly better."""
    example, tuned, lists, config = task
    pool = _compiler_pool(config.candidate_timeout_s)
    record: dict[str, Any] = {"key": example["id"], "split": example["split"], "source": example["source"]}
    for objective in config.objectives:
        own = tuned[objective]
        best_cost, best_list, origin = own["best"], own["pass_list"], "autotune"
        candidates = [p for p in lists.get(objective, []) if p != own["pass_list"]]
        evaluations = pool.evaluate(example["ir"], candidates, objective) if candidates else []
        for evaluation in evaluations:  # strictly better only: the autotuner's list is already minimal
            if evaluation.cost is not None and evaluation.cost < best_cost:
                best_cost, best_list, origin = evaluation.cost, list(evaluation.pass_list), "broadcast"
        record[objective] = {
            "oz": own["oz"],
            "best": best_cost,
            "pass_list": best_list,
            "from": origin,
            "compilations": len(evaluations),
            "failed": sum(e.cost is None for e in evaluations),
        }
    return record


# --- reading labels --------------------------------------------------------------------------------------


def read_examples(shard: Path, limit: int | None = None) -> list[dict[str, Any]]:
    examples = list(read_jsonl(shard))
    return examples[:limit] if limit is not None else examples


def read_labels(layout: CorpusLayout, stage: str, shards: Iterable[Path] | None = None) -> dict[str, dict]:
    """Every label of a stage so far (finished shards and in-progress journals), by example id."""
    shards = list(shards) if shards is not None else layout.shards()
    labels: dict[str, dict] = {}
    for shard in shards:
        records: list[tuple[str, dict]] = []
        final = layout.label_path(stage, shard)
        if final.exists():
            records += [(r["key"], r) for r in read_jsonl(final)]
        journal = layout.label_journal(stage, shard)
        if journal.exists():
            records += list(Journal(journal).records().items())
        for key, record in records:
            labels[key] = merged_label(labels.get(key), record)
    return labels


def merged_label(earlier: dict | None, later: dict) -> dict:
    """A later record of an example replaces the objectives it holds and keeps the earlier one's others: a
    shard labelled for one objective and then searched for another keeps both (a journal of the second
    search beside the first's finished file). A later error stands alone; a later label clears an error."""
    if earlier is None or "error" in later or "error" in earlier:
        return later
    return {**earlier, **later}


# --- broadcast lists -------------------------------------------------------------------------------------


def broadcast_lists(tuned: Iterable[dict[str, Any]], objectives: tuple[str, ...], limit: int = 0):
    """Per objective: the unique best lists other than plain -Oz, most often best first (then by gain)."""
    lists: dict[str, list[list[str]]] = {}
    for objective in objectives:
        wins: Counter[tuple[str, ...]] = Counter()
        gain: Counter[tuple[str, ...]] = Counter()
        for record in tuned:
            if "error" in record:
                continue
            label = record[objective]
            pass_list = tuple(label["pass_list"])
            if pass_list != OZ and label["best"] < label["oz"]:
                wins[pass_list] += 1
                gain[pass_list] += label["oz"] - label["best"]
        ranked = sorted(wins, key=lambda p: (-wins[p], -gain[p], p))
        lists[objective] = [list(p) for p in (ranked[:limit] if limit else ranked)]
    return lists


def _fingerprint(lists: dict[str, list[list[str]]]) -> str:
    return hashlib.sha256(json.dumps(lists, sort_keys=True).encode()).hexdigest()[:16]


# --- the driver ------------------------------------------------------------------------------------------


def label(
    layout: CorpusLayout,
    shards: list[Path],
    stage: str,
    config: LabelConfig,
    runner: Runner,
    time_limit_s: float | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> LabelSummary:
    """Run one stage over `shards`, resuming where an earlier run stopped.

    With `config.limit_per_shard` (a sample) labels stay in the journals and no shard is marked finished.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose from {', '.join(STAGES)}")
    if stage == "measure" and not config.seeds:
        raise ValueError("stage measure needs the lists to measure (--seeds)")
    started = time.monotonic()
    summary = LabelSummary(stage)
    plan = _plan_broadcast(layout, config, log) if stage == "broadcast" else {}

    progress_of: dict[Path, _ShardProgress] = {}
    shard_of: dict[str, Path] = {}
    tasks: list[Any] = []
    for shard in shards:
        examples = read_examples(shard, config.limit_per_shard)
        if not examples:
            continue
        lists, tuned = plan.get(examples[0]["split"], ({}, {}))
        if stage == "broadcast" and not layout.label_path("autotune", shard).exists():
            log(f"{shard.name}: autotune stage not finished, no broadcast yet")
            continue
        fingerprint = _fingerprint(lists) if plan else None
        if stage == "measure":  # measurements of another seed set are redone
            fingerprint = seeds_fingerprint(config.seeds)
        state = _ShardProgress.load(layout, stage, shard, examples, fingerprint, config.objectives)
        if state.finished:
            summary.skipped += len(examples)
            continue
        progress_of[shard] = state
        summary.skipped += len(state.done)
        for example in state.todo:
            shard_of[example["id"]] = shard
            if stage in ("autotune", "local", "measure"):
                tasks.append((example, config))
            elif "error" not in tuned.get(example["id"], {"error": "missing"}):
                tasks.append((example, tuned[example["id"]], lists, config))
            else:  # its autotune failed: nothing to broadcast to
                state.pending -= 1
        state.finish_if_done(config.limit_per_shard is None, summary)

    work = {
        "autotune": autotune_function,
        "broadcast": broadcast_function,
        "local": local_search_function,
        "measure": measure_function,
    }[stage]
    deadline = started + time_limit_s if time_limit_s else None
    bar = tqdm(total=len(tasks), unit="fn", disable=not progress, smoothing=0.05, desc=stage)
    results = runner.run(work, tasks)
    try:
        for task, outcome in results:
            example = task[0]
            record = outcome
            if isinstance(outcome, TaskFailure):
                record = {"key": example["id"], "split": example["split"], "source": example["source"],
                          "error": f"{outcome.kind}: {outcome.message}"}  # fmt: skip
            state = progress_of[shard_of[example["id"]]]
            if state.fingerprint is not None:
                record["lists"] = state.fingerprint
            summary.functions += 1
            summary.failed += "error" in record
            summary.compilations += sum(record.get(o, {}).get("compilations", 0) for o in config.objectives)
            state.add(record)
            state.finish_if_done(config.limit_per_shard is None, summary)
            bar.update()
            bar.set_postfix(comp_per_s=f"{summary.compilations / max(time.monotonic() - started, 1e-9):.0f}")
            if deadline is not None and time.monotonic() >= deadline:
                summary.stopped_early = True
                log(f"time limit reached after {summary.functions} functions; run again to resume")
                break
    finally:
        results.close()  # stops the runner's workers; unfinished functions are not journaled, so redone later
        bar.close()
        for state in progress_of.values():
            state.journal.close()
    summary.seconds = time.monotonic() - started
    return summary


@dataclass
class _ShardProgress:
    """One shard's labelling state: what its journal holds and how many functions are still to come."""

    layout: CorpusLayout
    stage: str
    shard: Path
    examples: list[dict[str, Any]]
    journal: Journal
    done: dict[str, dict]
    todo: list[dict[str, Any]]
    pending: int
    fingerprint: str | None  # broadcast: the list set the labels were made with
    finished: bool = False

    @classmethod
    def load(cls, layout, stage, shard, examples, fingerprint, objectives=OBJECTIVES) -> _ShardProgress:
        """A labelled example is done when its record has every objective asked for (or an error)."""
        final = layout.label_path(stage, shard)
        journal = Journal(layout.label_journal(stage, shard))
        earlier = {}
        if final.exists():
            first = next(read_jsonl(final), {})
            earlier = {r["key"]: r for r in read_jsonl(final)} if first.get("lists") == fingerprint else {}
            if earlier and all(_has(r, objectives) for r in earlier.values()):
                return cls(layout, stage, shard, examples, journal, {}, [], 0, fingerprint, finished=True)
            # Other broadcast lists, or objectives missing: its labels go back to the journal, under what the
            # journal already holds of the same example (a later search's other objective must not be lost).
            journaled = journal.records()
            final.unlink()
            for key, record in earlier.items():
                journal.append(merged_label(record, journaled[key]) if key in journaled else record)
        done = {k: r for k, r in journal.records().items() if r.get("lists") == fingerprint}
        todo = [e for e in examples if not _has(done.get(e["id"]), objectives)]
        return cls(layout, stage, shard, examples, journal, done, todo, len(todo), fingerprint)

    def add(self, record: dict[str, Any]) -> None:
        """Journal `record`, keeping the other objectives an earlier record of the example has."""
        earlier = self.done.get(record["key"])
        if earlier is not None and "error" not in earlier and "error" not in record:
            record = {**earlier, **record}
        self.journal.append(record)
        self.done[record["key"]] = record
        self.pending -= 1

    def finish_if_done(self, whole_shard: bool, summary: LabelSummary) -> None:
        """All functions labelled: write the label shard atomically (example order) and drop the journal."""
        if self.pending > 0 or self.finished or not whole_shard:
            return
        ordered = [self.done[e["id"]] for e in self.examples if e["id"] in self.done]
        write_jsonl_atomic(self.layout.label_path(self.stage, self.shard), ordered)
        self.journal.close()
        self.journal.path.unlink(missing_ok=True)
        self.finished = True
        summary.shards_completed.append(self.shard.name)


def _has(record: dict[str, Any] | None, objectives: tuple[str, ...]) -> bool:
    return record is not None and ("error" in record or all(o in record for o in objectives))


def _plan_broadcast(layout: CorpusLayout, config: LabelConfig, log) -> dict[str, tuple]:
    """Per split: the broadcast lists (from every autotune label of that split) and the autotune labels."""
    tuned = read_labels(layout, "autotune")
    by_split: dict[str, dict[str, dict]] = defaultdict(dict)
    for key, record in tuned.items():
        by_split[record["split"]][key] = record
    plan = {}
    for split, records in sorted(by_split.items()):
        lists = broadcast_lists(records.values(), config.objectives, config.broadcast_lists)
        lists_file = layout.labels_dir / "broadcast" / f"lists-{split}.json"
        write_atomic(lists_file, json.dumps(lists, indent=1) + "\n")
        log(f"{split}: broadcasting " + ", ".join(f"{len(v)} {k} lists" for k, v in lists.items()))
        plan[split] = (lists, records)
    return plan


def searched_labels(layout: CorpusLayout, shards: list[Path]) -> dict[str, dict[str, dict]]:
    """Per example id and objective, the better label of the two searches (random autotune, local search).

    The corpus of generated and test-suite functions was labelled by the autotuner, the real-code corpus by
    local search; a function labelled by both keeps the cheaper best.
    """
    merged: dict[str, dict[str, dict]] = {}
    for stage in ("autotune", "local"):
        for key, record in read_labels(layout, stage, shards).items():
            if "error" in record:
                continue
            for objective in (o for o in OBJECTIVES if o in record):
                label, current = record[objective], merged.setdefault(key, {}).get(objective)
                if current is None or _cost_or_inf(label) < _cost_or_inf(current):
                    merged[key][objective] = label
    return fold_measurements(merged, read_labels(layout, "measure", shards))


def fold_measurements(labels: dict[str, dict], measured: dict[str, dict]) -> dict[str, dict]:
    """Labels with each stage-`measure` record's seed costs added under `measured` {seed fingerprint: costs}.

    Only labelled examples take measurements (a measurement alone has no best list); `labels` is changed.
    """
    for key, record in measured.items():
        if "error" in record or key not in labels:
            continue
        for objective in (o for o in OBJECTIVES if o in record and o in labels[key]):
            label, measurement = labels[key][objective], record[objective]
            label["measured"] = {**label.get("measured", {}), measurement["seeds"]: measurement["seed_costs"]}
    return labels


def _cost_or_inf(label: dict) -> float:
    return label["best"] if label.get("best") is not None else math.inf


def iter_labelled(layout: CorpusLayout, splits: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """Examples joined with their final labels (broadcast if present, else the search's) per objective."""
    shards = layout.shards(splits)
    tuned = searched_labels(layout, shards)
    broadcast = read_labels(layout, "broadcast", shards)
    for shard in shards:
        for example in read_jsonl(shard):
            base = tuned.get(example["id"])
            if base is None:
                continue
            final = broadcast.get(example["id"])
            final = final if final is not None and "error" not in final else base
            labels = {}
            for objective in (o for o in OBJECTIVES if o in base):
                chosen = final.get(objective, base[objective])
                broadcast_compilations = chosen["compilations"] if chosen is not base[objective] else 0
                labels[objective] = {
                    "unoptimized": base[objective]["unoptimized"],
                    "oz": base[objective]["oz"],
                    "autotune": base[objective]["best"],
                    "best": chosen["best"],
                    "pass_list": chosen["pass_list"],
                    "compilations": base[objective]["compilations"] + broadcast_compilations,
                }
            yield {**example, "labels": labels}
