"""Feedback training examples (thesis ch. 5, "Fast Feedback"): the model's own answers, compiled, fed back.

    python -m optserve.passlm.feedback_examples generate --corpus data/corpus --splits train \
        --every 12 --limit 5000 --time-limit 960 --out runs/passlm/feedback/feedback.jsonl.xz
    python -m optserve.passlm.feedback_examples mix --original runs/passlm/train.jsonl.xz \
        --feedback runs/passlm/feedback/feedback.jsonl.xz --repeat 3 --out runs/passlm/feedback/mix.jsonl.xz

For each labelled function: ask the model (greedy, torch backend, instruction counts decoded) for a pass list,
compile it, and turn the outcome into the feedback text the engine appends in a retry round
(`optserve.engine.feedback.build_feedback`). The record's prompt is the profile's prompt with that feedback,
and its answer is the label's answer, rendered as `optserve.passlm.examples.training_texts` renders it: after
seeing how its first try did, the model is taught to write the best list the autotuner found. Records have
the fields of `optserve.passlm.examples` (id, source, oz, best, prompt, answer) plus `first_try` (the pass
list the model wrote and its actual cost), so `passlm/train.py` takes them mixed with the original records.
Records keep the function's id, so a function the trainer holds out for validation is held out in both forms.

`--every K` takes every K-th labelled function in shard order (spread over all sources); `--limit` and
`--time-limit` bound the run. `mix` writes the fine-tuning data: the original records, then the feedback
records `--repeat` times (a few thousand feedback records would otherwise be a few percent of the batches).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from optserve.compiler.cost import Objective
from optserve.compiler.ir import IRError, instruction_count
from optserve.compiler.pipeline import evaluate
from optserve.engine.feedback import build_feedback
from optserve.engine.interface import Candidate, Engine, SamplingOptions
from optserve.passlm.examples import (
    OBJECTIVE,
    PASSFORMER_PROFILE,
    read_records,
    training_texts,
    write_records,
)

FIRST_TRY = SamplingOptions(
    predict_costs=True, objective=OBJECTIVE
)  # greedy; the counts are what the feedback checks


def _instructions(ir: str) -> int | None:
    """The input's instruction count, as the service's feedback loop counts it (None: LLVM cannot)."""
    try:
        return instruction_count(ir)
    except IRError:
        return None


async def feedback_record(engine: Engine, example: dict, profile=PASSFORMER_PROFILE) -> dict | None:
    """One feedback training record for a labelled example, or None if the model gave no candidate."""
    label = example["labels"][OBJECTIVE]
    ir = example["ir"]
    generation = await engine.generate(ir, FIRST_TRY)
    if not generation.candidates:
        return None
    candidate: Candidate = generation.candidates[0]
    evaluation = evaluate(ir, candidate.pass_list, Objective(OBJECTIVE))
    feedback = build_feedback([(candidate, evaluation)], OBJECTIVE, _instructions(ir))
    _, answer = training_texts(example, profile, OBJECTIVE)
    return {
        "id": example["id"],
        "source": example["source"],
        "oz": label["oz"],
        "best": label["best"],
        "prompt": profile.prompt(ir, feedback, OBJECTIVE),
        "answer": answer,
        "first_try": {"pass_list": list(candidate.pass_list), "cost": evaluation.cost},
    }


def labelled_examples(corpus: Path, splits: tuple[str, ...], every: int) -> Iterator[dict]:
    """Every `every`-th example with an instruction-count label, in shard order."""
    from optserve.corpus.label import iter_labelled
    from optserve.corpus.layout import CorpusLayout

    index = 0
    for example in iter_labelled(CorpusLayout(corpus), splits):
        label = example["labels"].get(OBJECTIVE)
        if label is None or label.get("best") is None:
            continue
        if index % every == 0:
            yield example
        index += 1


def generate_records(
    engine: Engine,
    examples: Iterator[dict],
    limit: int | None = None,
    time_limit_s: float | None = None,
    skip_errors: bool = True,
) -> Iterator[dict]:
    """Feedback records, one per example, until `limit` records or `time_limit_s` seconds."""
    from optserve.engine.engine import PromptTooLongError

    started = time.monotonic()
    produced = 0
    for example in examples:
        if limit is not None and produced >= limit:
            return
        if time_limit_s is not None and time.monotonic() - started > time_limit_s:
            return
        try:
            record = asyncio.run(feedback_record(engine, example))
        except PromptTooLongError:
            if not skip_errors:
                raise
            continue
        if record is not None:
            produced += 1
            yield record


def mix_records(original: list[dict], feedback: list[dict], repeat: int) -> Iterator[dict]:
    """The original records, then the feedback records `repeat` times (without their `first_try`)."""
    yield from original
    for _ in range(repeat):
        for record in feedback:
            yield {k: v for k, v in record.items() if k != "first_try"}


def main(argv: list[str] | None = None) -> int:
    main_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = main_parser.add_subparsers(dest="command", required=True)
    mix = commands.add_parser("mix", help="original + feedback records for fine-tuning")
    mix.add_argument("--original", type=Path, required=True)
    mix.add_argument("--feedback", type=Path, required=True)
    mix.add_argument("--repeat", type=int, default=1)
    mix.add_argument("--out", type=Path, required=True)
    gen = commands.add_parser("generate", help="feedback records from the model's own first tries")
    gen.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    gen.add_argument("--splits", default="train", help="comma-separated")
    gen.add_argument("--model-dir", type=Path, default=Path("models/passformer"))
    gen.add_argument("--every", type=int, default=15, help="take every K-th labelled function")
    gen.add_argument("--limit", type=int, help="at most this many records")
    gen.add_argument("--time-limit", type=float, help="stop after this many seconds")
    gen.add_argument("--out", type=Path, required=True, help=".jsonl or .jsonl.xz")
    args = main_parser.parse_args(argv)
    if args.command == "mix":
        counts = write_records(
            mix_records(read_records(args.original), read_records(args.feedback), args.repeat), args.out
        )
        print(json.dumps({"out": str(args.out), "records": sum(counts.values())}))
        return 0
    from optserve.engine.engine import ModelEngine

    engine = ModelEngine.load(args.model_dir, backend="torch")
    splits = tuple(s.strip() for s in args.splits.split(","))
    started = time.monotonic()
    records = generate_records(
        engine, labelled_examples(args.corpus, splits, args.every), args.limit, args.time_limit
    )
    improved = []

    def counted(stream: Iterator[dict]) -> Iterator[dict]:
        for record in stream:
            improved.append(
                record["first_try"]["cost"] is not None and record["first_try"]["cost"] < record["oz"]
            )
            if len(improved) % 200 == 0:
                print(
                    f"{len(improved)} records, {time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            yield record

    counts = write_records(counted(records), args.out)
    if not counts:
        print(f"error: no labelled {args.splits} examples in {args.corpus}", file=sys.stderr)
        return 1
    summary = {
        "out": str(args.out),
        "records": sum(counts.values()),
        "first_try_beats_oz": sum(improved),
        "seconds": round(time.monotonic() - started, 1),
        "by_source": counts,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
