"""The pass-ordering model's tokenizer: byte-level BPE trained on corpus IR, pass names as single tokens.

    python -m optserve.passlm.tokenizer --data runs/passlm/train.jsonl.xz --vocab-size 8192 \
        --out runs/passlm/tokenizer [--eval runs/passlm/test.jsonl.xz]

Writes a standard Hugging Face tokenizer directory and prints characters per token on IR (thesis §4.3.1:
2.02 with the Llama 2 tokenizer), measured on `--eval` prompts if given (IR the tokenizer was not trained on).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>")


def train_tokenizer(texts: Iterable[str], vocab_size: int, pass_tokens: bool = True):
    """Byte-level BPE over `texts` (HF fast tokenizer); with `pass_tokens`, every pass name and meta flag is
    an added single token, else pass names are spelled by BPE pieces like any other text."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from optserve.compiler.passes import META_FLAGS, PASS_NAMES

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    if pass_tokens:
        bpe.add_tokens(
            [AddedToken(name, normalized=False, special=False) for name in (*META_FLAGS, *PASS_NAMES)]
        )
    bos, eos, pad = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=bos, eos_token=eos, pad_token=pad)


def chars_per_token(tokenizer, texts: list[str]) -> float:
    tokens = sum(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    return sum(len(t) for t in texts) / max(tokens, 1)


def main(argv: list[str] | None = None) -> int:
    from optserve.passlm.examples import read_records

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="training records (passlm.examples)")
    parser.add_argument("--vocab-size", type=int, default=8192, help="BPE vocabulary before pass tokens")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--eval", type=Path, help="records to measure characters per token on")
    args = parser.parse_args(argv)
    records = read_records(args.data)
    if not records:
        print(f"error: no records in {args.data}", file=sys.stderr)
        return 1
    tokenizer = train_tokenizer((r["prompt"] + r["answer"] for r in records), args.vocab_size)
    tokenizer.save_pretrained(args.out)
    measured = read_records(args.eval) if args.eval else records
    prompts = [r["prompt"] for r in measured]
    print(
        json.dumps(
            {
                "out": str(args.out),
                "vocab": len(tokenizer),
                "trained_on": len(records),
                "chars_per_token_ir": round(chars_per_token(tokenizer, prompts), 3),
                "measured_on": str(args.eval or args.data),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
