"""Pretrain the pass-ordering model from scratch: next-token prediction on unlabelled IR, DDP over the GPUs.

    torchrun --nproc_per_node=4 passlm/pretrain.py --data runs/pretrain/data --out runs/pretrain/run \
        --steps 2000 --time-limit 450 [--resume]
    python -m optserve.passlm.pretrain ...        # one process (CPU or one GPU): no torchrun needed

The thesis' model and LLM Compiler learn IR at scale before they learn pass lists; fine-tuning alone sees
only the labelled examples. This trainer reads the token shards of `passlm/pretrain_data.py` (documents packed
back to back, BOS/EOS between them) and trains a larger Llama than the bundled one:

- **Model** (`PRETRAIN_ARCHITECTURE`, `passlm/train.py`'s `Architecture` and `build_model`, so fine-tuning
  rebuilds it with `--arch`): hidden 512, 8 layers, 8 query heads of 64, 2 key/value heads, SwiGLU 1408,
  tied embeddings: 26.8M parameters, 54 MB in bf16 (under 60 MB, the bundled model's size budget).
  Grouped-query attention keeps the KV cache of a 16k-token unit at 8 MB (fp16) and the priority-sampling tree
  cheap; the 8,228-token vocabulary keeps the embeddings to 4.2M. RoPE (theta 10,000, train.py's default,
  whose slowest wavelength is 63k positions) with 16,384 positions: windows of `--seq-len` (default 8192)
  tokens, and the last `--long-fraction` of the steps at `--long-seq-len` (default 16384, the same tokens per
  step), so the whole context the engine may use has been trained on.
- **Data order**: windows of seq-len + 1 tokens at multiples of seq-len; each epoch a seeded permutation.
  Global sequence k of the run is a pure function of (seed, phase, k), so any world size and any resume
  sees the same batches.
- **Optimizer**: AdamW (betas 0.9/0.95, weight decay on matrices only), `train.learning_rate`'s linear
  warm-up and cosine decay to 10% over `--steps`; bf16 autocast, fp32 master weights, gradient clipping 1.0.
- **Checkpoints** (`checkpoint.pt`: model, optimizer, step; read with `weights_only=True`) every
  `--checkpoint-every` steps and when `--time-limit` comes near (all ranks agree on when); `--resume`
  continues bit for bit where the file is (the same machine, or a warm lent machine between calls: 320 MB
  does not travel). `final/` (HF config, bf16 safetensors, tokenizer) is written at every stop; it is what
  `passlm/train.py --init-from` fine-tunes and `python -m optserve.passlm.package` turns into a model
  directory.
- **Log** (`log.jsonl`): a start record (as `passlm.package` reads), every `--log-every` steps the loss,
  learning rate, tokens/s (all GPUs) and MFU: 6·N·tokens/s over the GPUs' peak dense bf16 FLOP/s (H100/H200
  SXM 989 TFLOP/s), and the same with the causal attention matmuls (6·layers·hidden·seq per token) counted;
  validation loss on the val shards every `--eval-every` steps.

Runs wherever torch and transformers are: it imports only them, numpy, `train.py` and `pretrain_data.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

try:
    from optserve.passlm.pretrain_data import MANIFEST, read_shards
    from optserve.passlm.train import Architecture, build_model, learning_rate, save_final
except (
    ImportError
):  # a plain script (the lent machine has no installed optserve): its own folder is on the path
    from pretrain_data import MANIFEST, read_shards
    from train import Architecture, build_model, learning_rate, save_final

PRETRAIN_ARCHITECTURE = Architecture(
    hidden_size=512,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=2,
    intermediate_size=1408,
    max_position_embeddings=16384,
)
# Dense bf16 peak per GPU (no sparsity), by a substring of torch.cuda.get_device_name().
PEAK_BF16_FLOPS = (("H100 PCIe", 756e12), ("H100", 989.4e12), ("H200", 989.4e12), ("A100", 312e12))
CHECKPOINT = "checkpoint.pt"
TIME_CHECK_EVERY = 10  # steps between the ranks' agreement on the time limit (a host sync each)


class Distributed:
    """torchrun's process group (nccl on GPUs, gloo on CPU), or one process without one."""

    def __init__(self) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        if self.world > 1:
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            torch.distributed.init_process_group(
                backend, device_id=self.device if backend == "nccl" else None
            )

    @property
    def main(self) -> bool:
        return self.rank == 0

    def mean(self, value: float) -> float:
        if self.world == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(tensor)
        return float(tensor) / self.world

    def any(self, flag: bool) -> bool:
        if self.world == 1:
            return flag
        tensor = torch.tensor([int(flag)], device=self.device)
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
        return bool(tensor)

    def close(self) -> None:
        if self.world > 1:
            torch.distributed.destroy_process_group()


class WindowSampler:
    """Global sequence k -> its window of `seq_len + 1` tokens: epoch k // n in a seeded permutation."""

    def __init__(self, tokens: np.ndarray, seq_len: int, seed: int, phase: int) -> None:
        self.tokens, self.seq_len, self.seed, self.phase = tokens, seq_len, seed, phase
        self.windows = (tokens.size - 1) // seq_len
        if self.windows < 1:
            raise ValueError(f"{tokens.size} tokens hold no window of {seq_len + 1}")
        self._orders: dict[int, np.ndarray] = {}

    def start(self, k: int) -> int:
        epoch, position = divmod(k, self.windows)
        if epoch not in self._orders:
            if len(self._orders) > 2:
                self._orders.clear()
            rng = np.random.default_rng([self.seed, self.phase, epoch])
            self._orders[epoch] = rng.permutation(self.windows)
        return int(self._orders[epoch][position]) * self.seq_len

    def batch(self, first: int, rows: int) -> torch.Tensor:
        starts = np.array([self.start(first + i) for i in range(rows)])
        index = starts[:, None] + np.arange(self.seq_len + 1)[None, :]
        return torch.from_numpy(self.tokens[index].astype(np.int64))


def peak_flops(device: torch.device, override_tflops: float | None) -> float | None:
    if override_tflops:
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((flops for key, flops in PEAK_BF16_FLOPS if key in name), None)


def flops_per_token(params: int, arch: Architecture, seq_len: int) -> tuple[float, float]:
    """(6·N, 6·N + causal attention matmuls 6·layers·hidden·seq): training FLOPs per token."""
    dense = 6.0 * params
    return dense, dense + 6.0 * arch.num_hidden_layers * arch.hidden_size * seq_len


def loss_of(model, window: torch.Tensor) -> torch.Tensor:
    inputs, targets = window[:, :-1], window[:, 1:]
    logits = model(input_ids=inputs).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


@torch.no_grad()
def validation_loss(model, sampler: WindowSampler | None, windows: int, dist: Distributed, autocast) -> float:
    """Mean loss over the first `windows` val windows (in file order), spread over the ranks."""
    if sampler is None:
        return float("nan")
    model.eval()
    total, count = 0.0, 0
    for j in range(dist.rank, min(windows, sampler.windows), dist.world):
        start = j * sampler.seq_len
        window = torch.from_numpy(sampler.tokens[start : start + sampler.seq_len + 1].astype(np.int64))
        with autocast():
            total += float(loss_of(model, window[None].to(dist.device)))
        count += 1
    model.train()
    sums = torch.tensor([total, count], dtype=torch.float64, device=dist.device)
    if dist.world > 1:
        torch.distributed.all_reduce(sums)
    return float(sums[0] / sums[1]) if sums[1] else float("nan")


def decay_groups(model, weight_decay: float) -> list[dict]:
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    others = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": matrices, "weight_decay": weight_decay}, {"params": others, "weight_decay": 0.0}]


def run_settings(args: argparse.Namespace, arch: Architecture, world: int, shards: list[str]) -> dict:
    """What a resumed run must share with the run it continues (else its batches or schedule differ)."""
    return {
        "arch": asdict(arch),
        "steps": args.steps,
        "seq_len": args.seq_len,
        "long_seq_len": args.long_seq_len,
        "long_fraction": args.long_fraction,
        "tokens_per_step": args.micro_batch * args.accumulate * world * args.seq_len,
        "lr": args.lr,
        "warmup": args.warmup,
        "weight_decay": args.weight_decay,
        "seed": args.seed,
        "train_shards": shards,
    }


def main(argv: list[str] | None = None) -> int:
    from transformers import PreTrainedTokenizerFast

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, required=True, help="pretrain_data.py output (manifest + shards)"
    )
    parser.add_argument(
        "--tokenizer", type=Path, help="default: the manifest's tokenizer, else models/passformer"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, help="optimizer steps: the schedule's length")
    parser.add_argument(
        "--epochs",
        type=float,
        help="instead of --steps: passes over the train tokens (the schedule's length)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument("--time-limit", type=float, help="seconds since start: checkpoint and stop before")
    parser.add_argument(
        "--stop-after", type=int, help="stop (checkpointed) after this many steps in this call"
    )
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--long-seq-len", type=int, default=16384, help="the last phase's window")
    parser.add_argument("--long-fraction", type=float, default=0.1, help="share of steps at --long-seq-len")
    parser.add_argument("--micro-batch", type=int, default=8, help="sequences per GPU per micro-step")
    parser.add_argument("--accumulate", type=int, default=1, help="micro-steps per optimizer step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--eval-windows", type=int, default=64, help="val windows per evaluation")
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--checkpoint-seconds", type=float, default=25.0, help="time kept for the last save")
    parser.add_argument("--arch", default="{}", help="JSON overrides of PRETRAIN_ARCHITECTURE")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (eager if it fails)")
    parser.add_argument("--peak-tflops", type=float, help="peak dense bf16 TFLOP/s per device, for MFU")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.steps is None and args.epochs is None and not args.resume:
        parser.error("give --steps or --epochs (or --resume)")
    if args.long_seq_len % args.seq_len:
        parser.error("--long-seq-len must be a multiple of --seq-len (the same tokens per step)")

    dist = Distributed()
    arch = replace(PRETRAIN_ARCHITECTURE, **json.loads(args.arch))
    if max(args.seq_len, args.long_seq_len) > arch.max_position_embeddings:
        parser.error(f"windows longer than the model's {arch.max_position_embeddings} positions")
    manifest = json.loads((args.data / MANIFEST).read_text())
    tokenizer_dir = args.tokenizer or Path(manifest.get("tokenizer", {}).get("path", "models/passformer"))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    train_tokens = read_shards(args.data, "train")
    train_shards = [s["file"] for s in manifest["shards"]["train"] if (args.data / s["file"]).exists()]
    try:
        val_tokens = read_shards(args.data, "val")
    except FileNotFoundError:
        val_tokens = None

    if args.steps is None and args.epochs is not None:
        tokens_per_step = args.micro_batch * args.accumulate * dist.world * args.seq_len
        args.steps = max(1, math.ceil(args.epochs * train_tokens.size / tokens_per_step))
    checkpoint_path = args.out / CHECKPOINT
    checkpoint = None
    if args.resume and checkpoint_path.exists():
        checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
        args.steps = args.steps or checkpoint["settings"]["steps"]
    elif args.resume and args.steps is None:
        parser.error(f"--resume: {checkpoint_path} does not exist; give --steps or --epochs to start")
    settings = run_settings(args, arch, dist.world, train_shards)
    if checkpoint is not None and checkpoint["settings"] != settings:
        differs = sorted(k for k in settings if checkpoint["settings"].get(k) != settings[k])
        raise SystemExit(f"--resume: this call's {differs} differ from the checkpoint's; pass the same flags")

    torch.manual_seed(args.seed)
    model = build_model(tokenizer, arch).to(dist.device)
    params = sum(p.numel() for p in model.parameters())
    cuda = dist.device.type == "cuda"
    optimizer = torch.optim.AdamW(
        decay_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.95), fused=cuda
    )
    state = {"step": 0, "tokens": 0}
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        state = dict(checkpoint["state"])
        del checkpoint
    trained = model
    if dist.world > 1:
        trained = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dist.local_rank] if cuda else None
        )
    forward = trained
    if args.compile:
        forward = torch.compile(trained)

    def autocast():
        return torch.autocast(dist.device.type, dtype=torch.bfloat16, enabled=cuda)

    long_start = args.steps - int(round(args.long_fraction * args.steps))
    phases = {
        0: WindowSampler(train_tokens, args.seq_len, args.seed, 0),
        1: WindowSampler(train_tokens, args.long_seq_len, args.seed, 1),
    }
    val_sampler = WindowSampler(val_tokens, args.seq_len, args.seed, 0) if val_tokens is not None else None
    peak = peak_flops(dist.device, args.peak_tflops)
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = (args.out / "log.jsonl").open("a") if dist.main else None

    def log(entry: dict) -> None:
        if log_file is not None:
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()
            print(json.dumps(entry), flush=True)

    log(
        {
            "event": "start",
            "device": str(dist.device),
            "gpu": torch.cuda.get_device_name(dist.device) if cuda else None,
            "world_size": dist.world,
            "params": params,
            "bf16_megabytes": round(params * 2 / 1e6, 1),
            "train_tokens": int(train_tokens.size),
            "train_shards": len(train_shards),
            "val_tokens": int(val_tokens.size) if val_tokens is not None else 0,
            "data_tokens_in_manifest": manifest.get("tokens"),
            "settings": settings,
            "long_phase_from_step": long_start,
            "peak_flops_per_device": peak,
            "resumed_at_step": state["step"],
            "compile": args.compile,
            "args": {k: str(v) for k, v in vars(args).items()},
        }
    )

    def save(reason: str) -> None:
        if dist.main:
            checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
            temporary = checkpoint_path.with_suffix(".tmp")
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "state": state,
                    "settings": settings,
                },  # fmt: skip
                temporary,
            )
            temporary.replace(checkpoint_path)
            save_final(model, tokenizer, args.out / "final")
            log({"event": "checkpoint", "step": state["step"], "reason": reason,
                 "elapsed_s": round(time.monotonic() - started, 1)})  # fmt: skip
        if dist.world > 1:
            torch.distributed.barrier()

    def evaluate() -> float:
        return validation_loss(model, val_sampler, args.eval_windows, dist, autocast)

    rows = args.micro_batch
    window_loss, window_tokens, window_flops, window_started = 0.0, 0, 0.0, time.monotonic()
    window_steps = 0
    call_tokens, call_started, call_steps = 0, None, 0
    step_seconds, last_check = 0.0, time.monotonic()
    model.train()
    reason = "end"
    while state["step"] < args.steps:
        phase = 1 if state["step"] >= long_start and long_start < args.steps else 0
        sampler = phases[phase]
        scale = sampler.seq_len // args.seq_len  # the long phase: fewer, longer rows, the same tokens
        phase_rows = max(1, rows // scale)
        per_step = phase_rows * args.accumulate * dist.world
        first_step = long_start if phase else 0
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(state["step"], args.steps, args.lr, args.warmup)
        step_loss = torch.zeros((), device=dist.device)  # summed on the device: no host sync per step
        for micro in range(args.accumulate):
            k = (state["step"] - first_step) * per_step + (micro * dist.world + dist.rank) * phase_rows
            window = sampler.batch(k, phase_rows)
            window = (window.pin_memory() if cuda else window).to(dist.device, non_blocking=True)
            sync = micro == args.accumulate - 1 or dist.world == 1
            context = trained.no_sync() if not sync else contextlib.nullcontext()
            with context, autocast():
                try:
                    loss = loss_of(forward, window) / args.accumulate
                except Exception as err:  # noqa: BLE001 - a compile failure must not end the run
                    if forward is trained:
                        raise
                    log({"event": "compile_failed", "error": str(err)[:500]})
                    forward = trained
                    loss = loss_of(forward, window) / args.accumulate
            loss.backward()
            step_loss += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        tokens = per_step * sampler.seq_len
        state["tokens"] += tokens
        dense, with_attention = flops_per_token(params, arch, sampler.seq_len)
        window_loss += step_loss
        window_steps += 1
        window_tokens += tokens
        window_flops += tokens * with_attention
        call_steps += 1
        if call_steps == 3:  # the first steps include CUDA and compile warm-up: throughput counts after them
            if cuda:
                torch.cuda.synchronize()
            call_started, call_tokens = time.monotonic(), 0
        elif call_started is not None:
            call_tokens += tokens
        if state["step"] % args.log_every == 0 or state["step"] == args.steps:
            if cuda:
                torch.cuda.synchronize()
            elapsed = time.monotonic() - window_started
            loss_mean = dist.mean(float(window_loss) / window_steps)
            tokens_per_s = window_tokens / elapsed
            entry = {
                "step": state["step"],
                "loss": round(loss_mean, 4),
                "lr": optimizer.param_groups[0]["lr"],
                "seq_len": sampler.seq_len,
                "tokens": state["tokens"],
                "tokens_per_s": round(tokens_per_s),
                "elapsed_s": round(time.monotonic() - started, 1),
            }
            if peak:
                entry["mfu"] = round(dense * tokens_per_s / (peak * dist.world), 4)
                entry["mfu_with_attention"] = round(window_flops / elapsed / (peak * dist.world), 4)
            log(entry)
            window_loss, window_tokens, window_flops, window_started = 0.0, 0, 0.0, time.monotonic()
            window_steps = 0
        if state["step"] % args.eval_every == 0:
            log({"step": state["step"], "val_loss": evaluate()})
        if state["step"] % args.checkpoint_every == 0 and state["step"] < args.steps:
            save("every")
        out_of_time = False
        if (
            args.time_limit is not None and state["step"] % TIME_CHECK_EVERY == 0
        ):  # the same steps on all ranks
            if cuda:
                torch.cuda.synchronize()
            now = time.monotonic()
            step_seconds = max(step_seconds * 0.9, (now - last_check) / TIME_CHECK_EVERY)
            last_check = now
            margin = TIME_CHECK_EVERY * step_seconds + args.checkpoint_seconds
            out_of_time = dist.any(now - started + margin > args.time_limit)
        if out_of_time or (args.stop_after is not None and call_steps >= args.stop_after):
            reason = "time limit" if out_of_time else "stop-after"
            break
    if state["step"] >= args.steps:
        reason = "end"
        log({"step": state["step"], "val_loss": evaluate()})
    save(reason)
    if call_started is not None:
        seconds = time.monotonic() - call_started
        tokens_per_s = call_tokens / seconds if seconds > 0 else 0.0
        summary = {
            "event": "stopped" if reason != "end" else "end",
            "reason": reason,
            "step": state["step"],
            "steps_this_call": call_steps,
            "tokens_per_s": round(tokens_per_s),
            "tokens_per_s_per_device": round(tokens_per_s / dist.world),
            "epochs": round(state["tokens"] / train_tokens.size, 3),
        }
        if peak:
            dense, _ = flops_per_token(params, arch, args.seq_len)
            summary["mfu"] = round(dense * tokens_per_s / (peak * dist.world), 4)
        log(summary)
    dist.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
