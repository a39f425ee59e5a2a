"""A tiny randomly initialized model directory in the bundled format, for tests and as a stand-in model.

    python -m optserve.engine.tiny_model OUT_DIR [--seed 0]

It writes what a trained model directory holds: a Hugging Face `LlamaForCausalLM` (config + safetensors,
fp32), a byte-level BPE tokenizer trained with `tokenizers` on synthetic -O0-style IR (every pass name and
meta flag an added single token), and `profile.json`. The weights are random (seeded, with a wide initializer
so next-token distributions are peaked rather than flat): its pass lists are valid but uninformed. The
trained model of issue 7 replaces it.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from optserve.engine.profile import ModelProfile

TINY_PROFILE = ModelProfile(
    model_id="passformer-tiny-random",
    prompt_template="<ir>\n{ir}</ir>\n{feedback}<answer>\n",
    feedback_template="<feedback>\n{feedback}</feedback>\n",
    answer_template="{pass_list}\n{cost_before} -> {cost_after}",
    pass_syntax="optserve",
    normalize_ir=True,
    add_bos=True,
    max_new_tokens=128,
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


def train_tokenizer(texts: list[str], vocab_size: int = 1024, pass_tokens: bool = True):
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
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    if pass_tokens:
        bpe.add_tokens(
            [AddedToken(name, normalized=False, special=False) for name in (*META_FLAGS, *PASS_NAMES)]
        )
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def build_tiny_model(out_dir: str | Path, seed: int = 0, hidden_size: int = 128, layers: int = 2) -> Path:
    """Write a tiny random model directory to `out_dir` (tokenizer, weights, profile.json)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(synthetic_corpus(400, seed) + _random_answers(400, seed))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.2,  # wide: peaked next-token distributions, so greedy choices are not near-ties
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    TINY_PROFILE.save(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = build_tiny_model(args.out_dir, seed=args.seed)
    size = sum(f.stat().st_size for f in path.iterdir())
    print(f"wrote {path} ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
