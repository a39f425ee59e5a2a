"""Training examples for the pass-ordering model: labelled corpus functions as prompt and answer text.

    python -m optserve.passlm.examples --corpus data/real/functions --splits train \
        --objectives text_size,instruction_count --out runs/passlm/train.jsonl.xz

Thesis Fig. 4.1: the prompt is the normalized unoptimized IR, then the objective the list is for; the answer
is the best pass list the labeller found, then the objective's cost before (no passes) and after it. Both come
from `PASSFORMER_PROFILE`, the profile the trained model ships with, so training and serving format examples
the same way. A function labelled for both objectives gives two examples. The output holds text, not token
ids: the trainer tokenizes with the tokenizer it is given (and runs on a machine without pydantic). Each
record's `group` (the package, else the source) is what the trainer holds out for validation, so validation
loss is measured on packages it did not train on.

With `--coreset-answers`, a function whose search measured every list of the bundled coreset (or of its
first `--coreset-lists`) also gets a second example whose answer is the coreset list that was best for it,
or -Oz where none beats -Oz: the model learns to rank the coreset's lists (strategy `ranked_coreset`), as
Coreset-NVP predicts the best coreset list per program. Its id ends in `/coreset` (`train.py --skip-kind`).

With `--max-tokens N` (and `--tokenizer`), examples longer than N tokens (BOS + prompt + answer + EOS, the
length `train.py --max-tokens` drops at) are left out here: the file carried to the lent machine shrinks by
what training would throw away (the longest functions are most of the bytes).

A label's answer is the cheapest *servable* list measured for the function (its search's best, a seed or a
measured coreset list): labels predate passes the vocabulary dropped.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from optserve.compiler.pipeline import OZ
from optserve.engine.passformer import PASSFORMER_PROFILE  # re-exported: training writes this format
from optserve.engine.profile import ModelProfile
from optserve.objectives import Objective

OBJECTIVE = Objective.INSTRUCTION_COUNT.value  # of the compiler-feedback examples (passlm.feedback_examples)
# The autotuner prefers the shortest list at equal cost, so "no passes" is a label (the function is already
# as small as it gets). The grammar has no empty list; -O0 runs no optimization, so it says the same.
NO_PASSES = ("-O0",)


def label_pass_list(pass_list: list[str]) -> tuple[str, ...]:
    return tuple(pass_list) or NO_PASSES


def training_texts(
    example: dict, profile: ModelProfile = PASSFORMER_PROFILE, objective: str | None = None
) -> tuple[str, str]:
    """(prompt, answer) of one labelled example from `optserve.corpus.label.iter_labelled`."""
    objective = objective or profile.objectives[0]
    label = example["labels"][objective]
    answer = profile.answer_format().render(
        label_pass_list(label["pass_list"]), label["unoptimized"], label["best"]
    )
    return profile.prompt(example["ir"], objective=objective), answer


def within_margin(answer: tuple[tuple[str, ...], int], oz: int, margin: float) -> tuple[tuple[str, ...], int]:
    """(list, cost) as the answer, or -Oz when the list is not smaller than -Oz by more than `margin` (a
    fraction): a model that answers alone, without the -Oz floor, should name a list only where it pays."""
    return answer if answer[1] < oz * (1 - margin) else (OZ, oz)


def best_coreset_list(
    known: Mapping[tuple[str, ...], int], coreset: Sequence[Sequence[str]]
) -> tuple[tuple[str, ...], int] | None:
    """The coreset list with the lowest measured cost (the earlier one on ties), or None unless every list of
    the coreset was measured: a partly measured coreset could hide its best list."""
    lists = [tuple(p) for p in coreset]
    if not lists or any(p not in known for p in lists):
        return None
    cost, _, best = min((known[p], index, p) for index, p in enumerate(lists))
    return best, cost


def best_servable_list(
    known: Mapping[tuple[str, ...], int],
) -> tuple[tuple[str, ...], int] | None:
    """The cheapest measured list the service can still serve (shorter, then earlier in order, on ties).

    Labels predate passes the vocabulary dropped (newgvn miscompiles real code): a label whose best list uses
    one teaches the model a list the grammar forbids, so its answer becomes the best servable list measured.
    """
    ranked = ranked_servable_lists(known, 1)
    return ranked[0] if ranked else None


def ranked_servable_lists(
    known: Mapping[tuple[str, ...], int], count: int
) -> list[tuple[tuple[str, ...], int]]:
    """The `count` cheapest measured lists the service can still serve, cheapest first (shorter, then earlier
    in order, on ties)."""
    from optserve.corpus.coreset import servable

    found = sorted((cost, len(p), index, p) for index, (p, cost) in enumerate(known.items()) if servable(p))
    return [(p, cost) for cost, _, _, p in found[:count]]


def iter_training_records(
    corpus: Path,
    splits: tuple[str, ...],
    objectives: tuple[str, ...] = PASSFORMER_PROFILE.objectives,
    coresets: Mapping[str, Sequence[Sequence[str]]] | None = None,
    coreset_margin: float = 0.0,
    label_margin: float = 0.0,
    top_answers: int = 1,
) -> Iterator[dict]:
    """Training records; with `coresets` (objective -> lists) also the best-coreset-list examples, which
    answer -Oz unless the best coreset list is smaller than -Oz by more than `coreset_margin` (a fraction).
    A label answers -Oz unless its best list is smaller than -Oz by more than `label_margin`. With
    `top_answers` K > 1, a function also gets examples answering with its 2nd..K-th cheapest measured lists,
    those that beat -Oz by more than `label_margin` (ids ending in /top2, /top3, ...)."""
    from optserve.corpus.coreset import known_costs, servable
    from optserve.corpus.label import iter_labelled, searched_labels
    from optserve.corpus.label_store import seed_sets
    from optserve.corpus.layout import CorpusLayout

    layout = CorpusLayout(corpus)
    searched = searched_labels(layout, layout.shards(splits))
    seeds = seed_sets(layout.labels_dir / "local")
    answer_format = PASSFORMER_PROFILE.answer_format()
    for example in iter_labelled(layout, splits):
        for objective in objectives:
            label = example["labels"].get(objective)
            if label is None or label.get("best") is None:
                continue
            raw = searched.get(example["id"], {}).get(objective)
            known = known_costs(raw, seeds) if raw else {}
            replacement = best_servable_list(known)
            if not servable(label_pass_list(label["pass_list"])) or (
                replacement is not None and replacement[1] < label["best"]
            ):
                if replacement is None:
                    continue
                label = {**label, "pass_list": list(replacement[0]), "best": replacement[1]}
                example = {**example, "labels": {**example["labels"], objective: label}}
            if label_margin:
                answer, cost = within_margin(
                    (tuple(label["pass_list"]), label["best"]), label["oz"], label_margin
                )
                label = {**label, "pass_list": list(answer), "best": cost}
                example = {**example, "labels": {**example["labels"], objective: label}}
            prompt, answer = training_texts(example, objective=objective)
            record = {
                "id": f"{example['id']}/{objective}",
                "group": example.get("package") or example["source"],
                "source": example["source"],
                "objective": objective,
                "oz": label["oz"],
                "best": label["best"],
                "prompt": prompt,
                "answer": answer,
            }
            yield record
            answered = tuple(label["pass_list"])
            ranked = ranked_servable_lists(known, top_answers) if top_answers > 1 else []
            runners_up = [(p, cost) for p, cost in ranked if p != answered][: top_answers - 1]
            for rank, (pass_list, cost) in enumerate(runners_up, start=2):
                if not cost < label["oz"] * (1 - label_margin):  # within_margin's rule, -Oz itself excluded
                    break  # only lists that beat -Oz: priority sampling's next draws should be good ones
                yield {
                    **record,
                    "id": f"{record['id']}/top{rank}",
                    "best": cost,
                    "answer": answer_format.render(pass_list, label["unoptimized"], cost),
                }
            if raw is None or objective not in (coresets or {}):
                continue
            found = best_coreset_list(known, coresets[objective])
            if found is None:
                continue
            found = within_margin(found, label["oz"], coreset_margin)  # -Oz rather than the least bad list
            yield {  # also where it repeats the label's list: a run may train on these records alone
                **record,
                "id": f"{record['id']}/coreset",
                "best": found[1],
                "answer": answer_format.render(found[0], label["unoptimized"], found[1]),
            }


def within_tokens(records: Iterator[dict], tokenizer, max_tokens: int, batch: int = 256) -> Iterator[dict]:
    """The records whose BOS + prompt + answer + EOS fit `max_tokens` tokens of `tokenizer` (the trainer
    counts the same way and drops the rest), tokenized in batches for speed."""
    pending: list[dict] = []

    def fitting(chunk: list[dict]) -> list[dict]:
        prompts = tokenizer([r["prompt"] for r in chunk], add_special_tokens=False)["input_ids"]
        answers = tokenizer([r["answer"] for r in chunk], add_special_tokens=False)["input_ids"]
        lengths = [len(p) + len(a) + 2 for p, a in zip(prompts, answers, strict=True)]
        return [record for record, length in zip(chunk, lengths, strict=True) if length <= max_tokens]

    for record in records:
        pending.append(record)
        if len(pending) == batch:
            yield from fitting(pending)
            pending = []
    if pending:
        yield from fitting(pending)


def read_ids(path: Path) -> set[str]:
    """Record ids (`<example id>/<objective>`), one per line: the examples a released model was trained on."""
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return {line.strip() for line in handle if line.strip()}


def write_records(records: Iterator[dict], out: Path) -> Counter:
    """Write JSON lines (xz-compressed when `out` ends in .xz); returns counts per source."""
    out.parent.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter()
    opener = lzma.open if out.suffix == ".xz" else open
    with opener(out, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
            counts[record.get("objective", record["source"])] += 1
    return counts


def read_records(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--splits", default="train", help="comma-separated")
    parser.add_argument(
        "--objectives", default=",".join(PASSFORMER_PROFILE.objectives), help="comma-separated"
    )
    parser.add_argument("--out", type=Path, required=True, help=".jsonl or .jsonl.xz")
    parser.add_argument(
        "--only-ids",
        type=Path,
        help="keep only these record ids (a released model's set, data/labels/real/training_sets/): labels "
        "added since then are left out, so its training data is rebuilt exactly",
    )
    parser.add_argument(
        "--coreset-answers",
        type=Path,
        help="a coreset (models/coreset/coreset.json): also write, for each function whose search measured "
        "all of its lists, an example answering with the coreset list that was best for it",
    )
    parser.add_argument(
        "--coreset-lists",
        type=int,
        help="with --coreset-answers: only its first K lists per objective (those measured on every function "
        "by `optserve dataset label --stage measure`)",
    )
    parser.add_argument(
        "--coreset-margin",
        type=float,
        default=0.0,
        help="with --coreset-answers: answer -Oz unless the best coreset list is smaller than -Oz by more "
        "than this fraction (a model that answers alone, without the -Oz floor, risks less)",
    )
    parser.add_argument(
        "--label-margin",
        type=float,
        default=0.0,
        help="answer -Oz unless the label's best list is smaller than -Oz by more than this fraction",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        help="leave out examples longer than this many tokens, as train.py --max-tokens would (a smaller "
        "file to carry)",
    )
    parser.add_argument(
        "--top-answers",
        type=int,
        default=1,
        help="also answer with each function's 2nd..K-th cheapest measured lists that beat -Oz (the label's "
        "top-k): several good answers per prompt, for priority sampling's later draws",
    )
    parser.add_argument("--tokenizer", type=Path, default=Path("models/passformer"), help="for --max-tokens")
    args = parser.parse_args(argv)
    splits = tuple(s.strip() for s in args.splits.split(","))
    objectives = tuple(o.strip() for o in args.objectives.split(","))
    if unknown := set(objectives) - set(PASSFORMER_PROFILE.objectives):
        parser.error(f"--objectives: {sorted(unknown)} not among {PASSFORMER_PROFILE.objectives}")
    coresets = None
    if args.coreset_answers:
        objective_lists = json.loads(args.coreset_answers.read_text())["objectives"]
        coresets = {
            objective: [entry["passes"] for entry in lists][: args.coreset_lists]
            for objective, lists in objective_lists.items()
        }
    records = iter_training_records(
        args.corpus, splits, objectives, coresets, args.coreset_margin, args.label_margin, args.top_answers
    )
    if args.only_ids:
        wanted = read_ids(args.only_ids)
        records = (r for r in records if r["id"] in wanted)
    if args.max_tokens:
        from transformers import AutoTokenizer  # only here: the rest of this module needs no transformers

        records = within_tokens(records, AutoTokenizer.from_pretrained(args.tokenizer), args.max_tokens)
    counts = write_records(records, args.out)
    if not counts:
        print(f"error: no labelled {args.splits} examples in {args.corpus} (label first)", file=sys.stderr)
        return 1
    print(json.dumps({"out": str(args.out), "examples": sum(counts.values()), "by_objective": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
