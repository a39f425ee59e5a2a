"""A tiny randomly initialized model directory in the bundled format, for tests and as a stand-in model.

    python -m optserve.passlm.tiny_model OUT_DIR [--seed 0]
    python -m optserve.passlm.tiny_model OUT_DIR --shape passformer   # the trained model's architecture


It writes what a trained model directory holds: a Hugging Face `LlamaForCausalLM` (config + safetensors,
fp32 or bf16), a byte-level BPE tokenizer trained with `tokenizers` on synthetic -O0-style IR (every pass
name and meta flag an added single token), and `profile.json`. The weights are random (seeded, with a wide
initializer so next-token distributions are peaked rather than flat): its pass lists are valid but
uninformed: it stands in for the trained model (models/passformer) where its answers do not matter.
`--shape passformer` gives the trained model's architecture (for latency work without its weights).
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, replace
from pathlib import Path

from optserve.engine.passformer import PASSFORMER_PROFILE

# The trained model's format, so the stand-in exercises exactly what the bundled model does.
TINY_PROFILE = PASSFORMER_PROFILE.model_copy(
    update={"model_id": "passformer-tiny-random", "max_new_tokens": 128}
)

_OPS = ("add nsw", "sub nsw", "mul nsw", "xor", "and", "or", "shl")


def synthetic_function(rng: random.Random, name: str = "f") -> str:
    """A small valid -O0-style LLVM IR function (allocas, loads/stores, arithmetic, a loop or a branch)."""
    args = [f"%a{i}" for i in range(rng.randint(1, 3))]
    lines = [f"define i32 @{name}({', '.join(f'i32 {a}' for a in args)}) {{", "entry:"]
    lines += [f"  {a}.addr = alloca i32, align 4" for a in args]
    lines += ["  %acc = alloca i32, align 4", "  %i = alloca i32, align 4"]
    lines += [f"  store i32 {a}, ptr {a}.addr, align 4" for a in args]
    lines += [f"  store i32 {rng.randint(0, 9)}, ptr %acc, align 4"]
    counter = iter(range(10_000))

    def arithmetic(block: list[str]) -> None:
        for _ in range(rng.randint(1, 4)):
            left, right, out = f"%t{next(counter)}", f"%t{next(counter)}", f"%t{next(counter)}"
            block.append(f"  {left} = load i32, ptr %acc, align 4")
            block.append(f"  {right} = load i32, ptr {rng.choice(args)}.addr, align 4")
            block.append(f"  {out} = {rng.choice(_OPS)} i32 {left}, {right}")
            block.append(f"  store i32 {out}, ptr %acc, align 4")

    shape = rng.choice(("straight", "loop", "branch"))
    arithmetic(lines)
    if shape == "loop":
        i, cmp, nxt = f"%t{next(counter)}", f"%t{next(counter)}", f"%t{next(counter)}"
        lines += ["  store i32 0, ptr %i, align 4", "  br label %cond", "cond:"]
        lines += [f"  {i} = load i32, ptr %i, align 4", f"  {cmp} = icmp slt i32 {i}, {rng.randint(2, 64)}"]
        lines += [f"  br i1 {cmp}, label %body, label %exit", "body:"]
        arithmetic(lines)
        j = f"%t{next(counter)}"
        lines += [f"  {j} = load i32, ptr %i, align 4", f"  {nxt} = add nsw i32 {j}, 1"]
        lines += [f"  store i32 {nxt}, ptr %i, align 4", "  br label %cond", "exit:"]
    elif shape == "branch":
        value, cmp = f"%t{next(counter)}", f"%t{next(counter)}"
        lines += [f"  {value} = load i32, ptr {args[0]}.addr, align 4"]
        lines += [
            f"  {cmp} = icmp sgt i32 {value}, {rng.randint(-5, 5)}",
            f"  br i1 {cmp}, label %then, label %exit",
        ]
        lines += ["then:"]
        arithmetic(lines)
        lines += ["  br label %exit", "exit:"]
    result = f"%t{next(counter)}"
    lines += [f"  {result} = load i32, ptr %acc, align 4", f"  ret i32 {result}", "}"]
    return "\n".join(lines) + "\n"


_SYLLABLES = tuple(c + v for c in "bcdfghklmnprstvwz" for v in "aeiou") + ("str", "ptr", "len", "buf", "idx")


def synthetic_identifiers(count: int, seed: int = 0) -> list[str]:
    """Lines of C-like names as they appear in IR (`@get_buffer`, `%struct.node`): real code's variety of
    identifiers, which a large BPE vocabulary needs to fill its merges."""
    rng = random.Random(seed)
    sigils = ("@", "%", "%struct.", "@.str.", "%")
    lines = []
    for _ in range(count):
        words = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 3))]
        lines.append(f"{rng.choice(sigils)}{'_'.join(words)}")
    return ["\n".join(lines[i : i + 50]) for i in range(0, len(lines), 50)]


def synthetic_corpus(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [synthetic_function(rng, f"f{i}") for i in range(count)]


def _random_answers(count: int, seed: int) -> list[str]:
    from optserve.compiler.passes import META_FLAGS, PASS_NAMES

    rng = random.Random(seed)
    answer = TINY_PROFILE.answer_format()
    texts = []
    for _ in range(count):
        passes = rng.sample(PASS_NAMES, rng.randint(0, 6))
        meta = [rng.choice(META_FLAGS)] if rng.random() < 0.5 else []
        texts.append(answer.render(tuple(meta + passes), rng.randint(1, 300), rng.randint(1, 300)))
    return texts


@dataclass(frozen=True)
class ModelShape:
    """A Llama architecture and tokenizer size for a random model."""

    hidden_size: int = 128
    layers: int = 2
    heads: int = 2
    kv_heads: int = 2
    intermediate_size: int | None = None  # None: 2 x hidden_size
    vocab_size: int = 1024  # BPE vocabulary before the added pass-name tokens
    tie_embeddings: bool = False
    max_positions: int = 2048
    storage_dtype: str = "float32"  # how the weights are saved (engines run fp32 on CPU either way)
    corpus_functions: int = 400  # synthetic IR functions the tokenizer is trained on
    corpus_identifiers: int = 0  # and lines of C-like names (variety for a large vocabulary)


SHAPES = {
    "tiny": ModelShape(),
    # The trained pass-ordering model's architecture (models/passformer/): a random model of this shape
    # costs what the trained one costs per token, so latency work and benchmarks use it.
    "passformer": ModelShape(
        hidden_size=256,
        layers=6,
        heads=8,
        kv_heads=2,
        intermediate_size=768,
        vocab_size=8192,
        tie_embeddings=True,
        max_positions=4096,
        storage_dtype="bfloat16",
        corpus_functions=2000,
        corpus_identifiers=100_000,
    ),
}


def build_tiny_model(out_dir: str | Path, seed: int = 0, shape: ModelShape | None = None) -> Path:
    """Write a random model directory to `out_dir` (tokenizer, weights, profile.json)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = shape or SHAPES["tiny"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = synthetic_corpus(shape.corpus_functions, seed) + _random_answers(shape.corpus_functions, seed)
    texts += synthetic_identifiers(shape.corpus_identifiers, seed)
    from optserve.passlm.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab_size=shape.vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size or 2 * shape.hidden_size,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=shape.max_positions,
        initializer_range=0.2,  # wide: peaked next-token distributions, so greedy choices are not near-ties
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=shape.tie_embeddings,
        dtype=shape.storage_dtype,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval().to(getattr(torch, shape.storage_dtype))
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    TINY_PROFILE.save(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny", help="architecture preset")
    for name, field_type in (("hidden-size", int), ("layers", int), ("heads", int), ("kv-heads", int)):
        parser.add_argument(f"--{name}", type=field_type, help="override the preset")
    parser.add_argument("--intermediate-size", type=int, help="override the preset")
    parser.add_argument("--vocab-size", type=int, help="BPE vocabulary before added pass tokens")
    args = parser.parse_args(argv)
    overrides = {
        key: value
        for key in ("hidden_size", "layers", "heads", "kv_heads", "intermediate_size", "vocab_size")
        if (value := getattr(args, key)) is not None
    }
    shape = replace(SHAPES[args.shape], **overrides)
    path = build_tiny_model(args.out_dir, seed=args.seed, shape=shape)
    size = sum(f.stat().st_size for f in path.iterdir())
    print(f"wrote {path} ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
