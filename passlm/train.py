"""Train the pass-ordering model from scratch: a small Llama on (normalized IR -> pass list, counts) examples.

    python -m optserve.passlm.train --data runs/passlm/train.jsonl.xz --tokenizer runs/passlm/tokenizer \
        --out runs/passlm/run [--steps N | --time-budget SECONDS] [--resume]

Runs wherever torch and transformers are (the lent GPU, or CPU for a smoke run): it imports nothing else, so
`passlm/train.py` also runs as a plain script on a machine without optserve installed.

- Examples (`optserve.passlm.examples`) are tokenized as serving does: BOS + prompt, answer + EOS. Examples
  longer than `--max-tokens` are dropped; `--val-share` of the groups (a record's `group`, its package for
  real code, else its id) are held out for validation, so the validation loss is measured on unseen packages.
- Loss: cross-entropy on answer tokens, plus prompt tokens at `--prompt-loss-weight` (language modelling on
  the IR itself teaches the model IR from few labelled examples).
- Batches hold up to `--batch-tokens` tokens of similar length. AdamW, linear warm-up, cosine decay over the
  run's steps. `--time-budget` times a few steps first, fixes the step count from it and logs it; the logged
  `--steps` reproduces the run.
- Writes `log.jsonl` (one line per log interval and per evaluation), `checkpoint.pt` (resumable: model,
  optimizer, schedule, data order) and, at the end, `final/` (HF config + bf16 safetensors).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Architecture:
    """The bundled model's shape: small enough to decode a pass list in milliseconds on a laptop CPU."""

    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 2  # grouped-query attention: a 4x smaller KV cache along the search tree
    intermediate_size: int = 768
    max_position_embeddings: int = 4096


@dataclass
class Example:
    ids: list[int]
    weights: list[float]  # per target position (ids[1:])


def read_records(path: Path) -> list[dict]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


LIST = 1.0  # the weight of pass-list tokens: validation metrics read the positions weighted so


def tokenize(
    records: list[dict], tokenizer, max_tokens: int, prompt_weight: float, count_weight: float = LIST
) -> list[Example]:
    """Token ids and per-target weights: prompt tokens `prompt_weight`, the pass list (through its closing
    newline) `LIST`, the predicted costs after it `count_weight` (an auxiliary target, thesis ch. 4)."""
    if not records:
        return []
    prompts = tokenizer([r["prompt"] for r in records], add_special_tokens=False)["input_ids"]
    answers = tokenizer([r["answer"] for r in records], add_special_tokens=False)["input_ids"]
    newline = {
        i for token, i in tokenizer.get_vocab().items() if "\n" in tokenizer.convert_tokens_to_string([token])
    }
    examples = []
    for prompt, answer in zip(prompts, answers, strict=True):
        ids = [tokenizer.bos_token_id, *prompt, *answer, tokenizer.eos_token_id]
        if len(ids) > max_tokens:
            continue
        list_end = next((i + 1 for i, token in enumerate(answer) if token in newline), len(answer))
        counts = len(answer) - list_end + 1  # the costs and EOS
        weights = [prompt_weight] * len(prompt) + [LIST] * list_end + [count_weight] * counts
        examples.append(Example(ids, weights))
    return examples


def record_kind(record_id: str) -> tuple[str, str]:
    """(`<example>/<objective>`, kind): kind is "" for the label's own answer, else `top2`.. or `coreset`."""
    head, _, last = record_id.rpartition("/")
    return (
        (head, last)
        if last == "coreset" or last.startswith("top") and last[3:].isdigit()
        else (record_id, "")
    )


def beating_coreset(records: list[dict]) -> list[dict]:
    """The records whose answer is cheaper than the coreset list that was best for the same function (its
    `/coreset` record, kept), and every record of a function without one: the model then learns the lists
    the service's coreset candidates do not already give (a function the coreset serves best keeps only its
    coreset answer)."""
    coreset_cost = {
        record_kind(r["id"])[0]: r["best"] for r in records if record_kind(r["id"])[1] == "coreset"
    }
    kept = []
    for record in records:
        key, kind = record_kind(record["id"])
        if kind == "coreset" or key not in coreset_cost or record["best"] < coreset_cost[key]:
            kept.append(record)
    return kept


def held_out(record: dict, share: float = 0.02) -> bool:
    group = record.get("group") or record["id"]
    return int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) / 16**8 < share


def make_batches(examples: list[Example], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Indices of examples in batches of similar length (padding stays small), batch order shuffled."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i].ids), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        length = len(examples[i].ids)
        if current and max(longest, length) * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(examples: list[Example], batch: list[int], pad_id: int, device) -> tuple[torch.Tensor, ...]:
    width = max(len(examples[i].ids) for i in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    weights = torch.zeros((len(batch), width - 1), dtype=torch.float32)
    for row, i in enumerate(batch):
        example = examples[i]
        ids[row, : len(example.ids)] = torch.tensor(example.ids)
        mask[row, : len(example.ids)] = 1
        weights[row, : len(example.weights)] = torch.tensor(example.weights)
    return ids.to(device), mask.to(device), weights.to(device)


def batch_loss(model, ids, mask, weights) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weighted loss, answer-token loss sum, answer-token count)."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    token_loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), reduction="none"
    )
    token_loss = token_loss.view_as(weights)
    answer = weights == LIST
    weighted = (token_loss * weights).sum() / weights.sum()
    return weighted, (token_loss * answer).sum(), answer.sum()


@torch.no_grad()
def evaluate(model, examples, batches, pad_id, device, autocast) -> dict:
    """Validation: mean loss of the `LIST`-weighted tokens and the share of those reproduced exactly (teacher
    forcing): the whole answer, or with `--count-weight` below 1 the pass list alone."""
    model.eval()
    loss_sum, tokens, exact, total = 0.0, 0, 0, 0
    for batch in batches:
        ids, mask, weights = collate(examples, batch, pad_id, device)
        with autocast():
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        token_loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        answer = weights == LIST
        loss_sum += float((token_loss * answer).sum())
        tokens += int(answer.sum())
        correct = (logits.argmax(-1) == ids[:, 1:]) | ~answer
        exact += int(correct.all(dim=1).sum())
        total += len(batch)
    model.train()
    return {"val_answer_loss": loss_sum / max(tokens, 1), "val_exact_answers": exact / max(total, 1)}


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def build_model(tokenizer, arch: Architecture):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        **asdict(arch),
    )
    return LlamaForCausalLM(config)


def main(argv: list[str] | None = None) -> int:
    from transformers import PreTrainedTokenizerFast

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, help="optimizer steps (the schedule's length)")
    parser.add_argument("--time-budget", type=float, help="seconds: fixes --steps from a timing probe")
    parser.add_argument("--time-limit", type=float, help="stop (checkpointed) after this many seconds")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument(
        "--init-from", type=Path, help="start from the weights of an earlier run's final/ (fresh optimizer)"
    )
    parser.add_argument(
        "--skip-kind",
        action="append",
        default=[],
        help="leave out records whose id ends in /KIND (e.g. coreset: the best-coreset-list examples)",
    )
    parser.add_argument(
        "--beat-coreset",
        action="store_true",
        help="answers only where cheaper than the function's best coreset list (its /coreset record)",
    )
    parser.add_argument("--max-tokens", type=int, default=2048, help="longest example (prompt + answer)")
    parser.add_argument("--batch-tokens", type=int, default=65536)
    parser.add_argument("--lr", type=float, default=1.5e-3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--prompt-loss-weight", type=float, default=0.1)
    parser.add_argument(
        "--count-weight", type=float, default=LIST, help="loss weight of the predicted costs after the list"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--val-share", type=float, default=0.02, help="share of groups held out")
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--arch", default="{}", help="JSON overrides of the Architecture fields")
    args = parser.parse_args(argv)
    if (args.steps is None) == (args.time_budget is None) and not args.resume:
        parser.error("give --steps or --time-budget")

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    use_bf16 = device.type == "cuda"

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)

    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.tokenizer)
    records = read_records(args.data)
    if args.beat_coreset:
        records = beating_coreset(records)
    records = [r for r in records if record_kind(r["id"])[1] not in args.skip_kind]
    train_records = [r for r in records if not held_out(r, args.val_share)]
    val_records = [r for r in records if held_out(r, args.val_share)]
    train = tokenize(train_records, tokenizer, args.max_tokens, args.prompt_loss_weight, args.count_weight)
    val = tokenize(val_records, tokenizer, args.max_tokens, args.prompt_loss_weight, args.count_weight)
    arch = Architecture(**json.loads(args.arch))
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = (args.out / "log.jsonl").open("a")

    def log(entry: dict) -> None:
        log_file.write(json.dumps(entry) + "\n")
        log_file.flush()
        print(json.dumps(entry), flush=True)

    model = build_model(tokenizer, arch)
    if args.init_from:
        from safetensors.torch import load_file

        weights = load_file(args.init_from / "model.safetensors")
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in weights.items()}, strict=False)
        if unexpected or set(missing) - {"lm_head.weight"}:  # lm_head is tied to the embeddings
            raise SystemExit(f"--init-from does not match: missing {missing}, unexpected {unexpected}")
    model = model.to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.95), fused=use_bf16
    )
    state = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "steps": args.steps}
    checkpoint_path = args.out / "checkpoint.pt"
    if args.resume and checkpoint_path.exists():
        # weights_only: tensors and plain values only, so a checkpoint file cannot run code when loaded
        checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=True)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        state = checkpoint["state"]
    pad_id = tokenizer.pad_token_id
    val_batches = make_batches(val, args.batch_tokens, random.Random(0))
    log(
        {
            "event": "start",
            "device": str(device),
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
            "params": sum(p.numel() for p in model.parameters()),
            "train_examples": len(train),
            "dropped_too_long": len(train_records) - len(train),
            "val_examples": len(val),
            "val_groups": sorted({r.get("group") or r["id"] for r in val_records})[:50],
            "train_tokens": sum(len(e.ids) for e in train),
            "arch": asdict(arch),
            "args": {k: str(v) for k, v in vars(args).items()},
            "resumed_at_step": state["step"],
            "init_from": str(args.init_from) if args.init_from else None,
        }
    )

    def save_checkpoint() -> None:
        torch.save(
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state},
            checkpoint_path.with_suffix(".tmp"),
        )
        checkpoint_path.with_suffix(".tmp").replace(checkpoint_path)

    started = time.monotonic()
    window_loss, window_tokens, window_started = 0.0, 0, time.monotonic()
    model.train()
    probe = (10, 40)  # steps timed by --time-budget; the first ones include CUDA warm-up
    while state["steps"] is None or state["step"] < state["steps"]:
        batches = make_batches(train, args.batch_tokens, random.Random(args.seed + state["epoch"]))
        for index in range(state["batch_in_epoch"], len(batches)):
            if state["steps"] is not None and state["step"] >= state["steps"]:
                break
            ids, mask, weights = collate(train, batches[index], pad_id, device)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(state["step"], state["steps"] or 10**9, args.lr, args.warmup)
            with autocast():
                loss, _, _ = batch_loss(model, ids, mask, weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            state["step"] += 1
            state["batch_in_epoch"] = index + 1
            window_loss += float(loss.detach())
            window_tokens += int(mask.sum())
            if state["steps"] is None and state["step"] == probe[0]:
                probe_started = time.monotonic()
            if state["steps"] is None and state["step"] == probe[1]:
                # --time-budget: the probe's pace fixes the schedule; log it so --steps reproduces the run
                per_step = (time.monotonic() - probe_started) / (probe[1] - probe[0])
                state["steps"] = max(probe[1] + 1, int(args.time_budget / per_step))
                log({"event": "schedule", "steps": state["steps"], "seconds_per_step": per_step})
            if state["step"] % 50 == 0:
                elapsed = time.monotonic() - window_started
                log(
                    {
                        "step": state["step"],
                        "epoch": state["epoch"],
                        "loss": window_loss / 50,
                        "lr": optimizer.param_groups[0]["lr"],
                        "tokens_per_s": window_tokens / elapsed,
                        "elapsed_s": time.monotonic() - started,
                    }
                )
                window_loss, window_tokens, window_started = 0.0, 0, time.monotonic()
            if state["step"] % args.eval_every == 0:
                log({"step": state["step"], **evaluate(model, val, val_batches, pad_id, device, autocast)})
                save_checkpoint()
            if args.time_limit is not None and time.monotonic() - started > args.time_limit:
                save_checkpoint()
                save_final(model, tokenizer, args.out / "final")  # usable, but resume to finish the schedule
                log({"event": "stopped", "step": state["step"], "reason": "time limit"})
                return 0
        else:
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
    log(
        {"step": state["step"], "event": "end", **evaluate(model, val, val_batches, pad_id, device, autocast)}
    )
    save_checkpoint()
    save_final(model, tokenizer, args.out / "final")
    return 0


def save_final(model, tokenizer, path: Path) -> None:
    """HF directory with bf16 weights (half the size; the engine computes in float32 on CPU)."""
    import copy

    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(path)
    tokenizer.save_pretrained(path)


if __name__ == "__main__":
    sys.exit(main())
