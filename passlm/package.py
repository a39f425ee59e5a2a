"""Turn a training run into a servable model directory: weights, tokenizer, profile and training summary.

    python -m optserve.passlm.package RUN_DIR --out models/passformer

RUN_DIR is `passlm.train`'s output (final/ and log.jsonl). The weights are loaded and saved again with this
machine's transformers (the GPU machine may run another version), so what lands in `--out` is known to load
here; `profile.json` is `PASSFORMER_PROFILE`, the format the examples were written in.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from optserve.passlm.examples import PASSFORMER_PROFILE

SUMMARY_FILE = "training_summary.json"


def training_summary(log_path: Path) -> dict:
    """The run's start record (data, arguments, size), its evaluations and its last training loss."""
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    starts = [e for e in entries if e.get("event") == "start"]
    return {
        "start": starts[-1] if starts else None,
        "evaluations": [e for e in entries if "val_answer_loss" in e],
        "last_train_loss": next((e for e in reversed(entries) if "loss" in e), None),
    }


def package(run_dir: Path, out: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    final = run_dir / "final"
    model = LlamaForCausalLM.from_pretrained(final, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(final)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    PASSFORMER_PROFILE.save(out)
    if (run_dir / "log.jsonl").exists():
        summary = training_summary(run_dir / "log.jsonl")
        (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("models/passformer"))
    args = parser.parse_args(argv)
    if not (args.run_dir / "final").is_dir():
        print(f"error: {args.run_dir}/final is missing (did the training run finish?)", file=sys.stderr)
        return 1
    out = package(args.run_dir, args.out)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(json.dumps({"out": str(out), "megabytes": round(size / 1e6, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
