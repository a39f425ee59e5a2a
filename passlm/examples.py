"""Training examples for the pass-ordering model: labelled corpus functions as prompt and answer text.

    python -m optserve.passlm.examples --corpus data/corpus --splits train --out runs/passlm/train.jsonl.xz

Thesis Fig. 4.1: the prompt is the normalized unoptimized IR; the answer is the best pass list the autotuner
found, then the instruction counts before and after it. Both come from `PASSFORMER_PROFILE`, the profile the
trained model ships with, so training and serving format examples the same way. The output holds text, not
token ids: the trainer tokenizes with the tokenizer it is given (and runs on a machine without pydantic).
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from optserve.engine.profile import ModelProfile

PASSFORMER_PROFILE = ModelProfile(
    model_id="passformer-7m",
    prompt_template="<ir>\n{ir}</ir>\n{feedback}<answer>\n",
    feedback_template="<feedback>\n{feedback}</feedback>\n",
    answer_template="{pass_list}\n{cost_before} -> {cost_after}",
    pass_syntax="optserve",
    normalize_ir=True,
    add_bos=True,
    max_new_tokens=64,
)
OBJECTIVE = "instruction_count"
# The autotuner prefers the shortest list at equal cost, so "no passes" is a label (the function is already
# as small as it gets). The grammar has no empty list; -O0 runs no optimization, so it says the same.
NO_PASSES = ("-O0",)


def label_pass_list(pass_list: list[str]) -> tuple[str, ...]:
    return tuple(pass_list) or NO_PASSES


def training_texts(example: dict, profile: ModelProfile = PASSFORMER_PROFILE) -> tuple[str, str]:
    """(prompt, answer) of one labelled example from `optserve.corpus.label.iter_labelled`."""
    label = example["labels"][OBJECTIVE]
    answer = profile.answer_format().render(
        label_pass_list(label["pass_list"]), label["unoptimized"], label["best"]
    )
    return profile.prompt(example["ir"]), answer


def iter_training_records(corpus: Path, splits: tuple[str, ...]) -> Iterator[dict]:
    from optserve.corpus.label import iter_labelled
    from optserve.corpus.layout import CorpusLayout

    for example in iter_labelled(CorpusLayout(corpus), splits):
        label = example["labels"].get(OBJECTIVE)
        if label is None or label.get("best") is None:
            continue
        prompt, answer = training_texts(example)
        yield {
            "id": example["id"],
            "source": example["source"],
            "oz": label["oz"],
            "best": label["best"],
            "prompt": prompt,
            "answer": answer,
        }


def write_records(records: Iterator[dict], out: Path) -> Counter:
    """Write JSON lines (xz-compressed when `out` ends in .xz); returns counts per source."""
    out.parent.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter()
    opener = lzma.open if out.suffix == ".xz" else open
    with opener(out, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
            counts[record["source"]] += 1
    return counts


def read_records(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--splits", default="train", help="comma-separated")
    parser.add_argument("--out", type=Path, required=True, help=".jsonl or .jsonl.xz")
    args = parser.parse_args(argv)
    splits = tuple(s.strip() for s in args.splits.split(","))
    counts = write_records(iter_training_records(args.corpus, splits), args.out)
    if not counts:
        print(f"error: no labelled {args.splits} examples in {args.corpus} (label first)", file=sys.stderr)
        return 1
    print(json.dumps({"out": str(args.out), "examples": sum(counts.values()), "by_source": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
