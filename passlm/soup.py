"""Interpolate the weights of two fine-tunes of one model (WiSE-FT, a two-model soup) into a model directory.

    python -m optserve.passlm.soup models/passformer runs/models/v5_run0 --alpha 0.5 --out runs/models/soup50

Weights become (1 - alpha) * A + alpha * B. Averaging only means something when B was fine-tuned from A (or
both from one start): then both lie in one basin and the mix often keeps what each does best (Wortsman et al.,
"Robust fine-tuning of zero-shot models", 2022). Shapes, dtypes and the tokenizer are checked; the result
keeps A's config, tokenizer and profile, and records both parents and alpha in its training summary.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from pathlib import Path

WEIGHTS_FILE = "model.safetensors"
SUMMARY_FILE = "training_summary.json"
COPIED_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "profile.json",
)


def interpolate(a: dict, b: dict, alpha: float) -> dict:
    """(1 - alpha) * a + alpha * b per tensor, computed in float32 and stored in a's dtype."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if a.keys() != b.keys():
        raise ValueError(f"the models hold different tensors: {sorted(a.keys() ^ b.keys())[:5]}")
    mixed = {}
    for name, tensor in a.items():
        other = b[name]
        if tensor.shape != other.shape:
            raise ValueError(f"{name}: shape {tuple(tensor.shape)} vs {tuple(other.shape)}")
        mixed[name] = ((1.0 - alpha) * tensor.float() + alpha * other.float()).to(tensor.dtype)
    return mixed


def soup(model_a: Path, model_b: Path, alpha: float, out: Path) -> Path:
    from safetensors.torch import load_file, save_file

    if not filecmp.cmp(model_a / "tokenizer.json", model_b / "tokenizer.json", shallow=False):
        raise ValueError("the two models have different tokenizers: their weights cannot be averaged")
    mixed = interpolate(load_file(model_a / WEIGHTS_FILE), load_file(model_b / WEIGHTS_FILE), alpha)
    out.mkdir(parents=True, exist_ok=True)
    for name in COPIED_FILES:
        if (model_a / name).exists():
            shutil.copy2(model_a / name, out / name)
    save_file(mixed, out / WEIGHTS_FILE, metadata={"format": "pt"})
    summaries = [json.loads((m / SUMMARY_FILE).read_text()) if (m / SUMMARY_FILE).exists() else None
                 for m in (model_a, model_b)]  # fmt: skip
    summary = {"soup": {"a": str(model_a), "b": str(model_b), "alpha": alpha}, "parents": summaries}
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_a", type=Path, help="alpha=0 gives it (its config, tokenizer are kept)")
    parser.add_argument("model_b", type=Path, help="the model alpha=1 gives")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        print(soup(args.model_a, args.model_b, args.alpha, args.out))
    except (ValueError, FileNotFoundError) as error:
        print(f"soup: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
