#!/usr/bin/env bash
# Evaluate a pass-ordering model on the lent GPU host, where the held-out real functions compile fast on every
# core: `optserve eval passes` (greedy, PS@10/@30, coreset@10/@30) and the tuner-seed measurement (compiles to
# 95% of a 1,000-compile search's saving, with and without the model's PS@10 as seeds), one call.
#
# Runs in the repository root on that machine (the `run` tool copies the working tree there; carry .carry):
#   passlm/eval_remote.sh MODEL [STEPS]
#   passlm/eval_remote.sh prepare        # only unpack the carried llvmlite into .lent/ (see below)
#     MODEL   a model directory (profile.json, e.g. models/passformer), or a `passlm/train.py` run's final/
#             (weights + tokenizer), or the run directory holding it: packaged here (`passlm.package`)
#     STEPS   eval,tune (default both): which of the two measurements to run
# Environment: LIMIT (functions, default 500 = all), BUDGET (search compiles, 1000), SAMPLES (1,10,30),
# DEVICE (cuda where nvidia-smi sees a GPU, else cpu), WORKERS (compiler processes, default every core),
# TIME_LIMIT (seconds per step, default 240, so both fit a 600 s call: eval passes stops starting functions and
# resumes from its journal in a later call; tuner_seeds reports the functions searched by then, the longest
# first: for all of them run the steps in two calls with TIME_LIMIT=480), PYTHON (python3), WHEELS (the
# wheelhouse, default .carry/wheels312; a local check under another Python names its own).
# Needs, carried in .carry/ (git-ignored; how they are made: docs/bench/passlm_pretraining.md):
#   .carry/eval/heldout_functions.tar.xz    the test split of the real functions with their labels
#   .carry/wheels312/*.whl                  pydantic, pydantic-settings, outlines-core ... (cp312), not there
#   .carry/llvmlite047.tar.xz               our llvmlite (LLVM 20.1.8): only while .lent/llvmlite047 is absent
#                                           (corpus/label_remote.sh unpacks it there too; a warm machine keeps it)
# The tree (31 MB) and llvmlite (35 MB) fill a call's 64 MiB: on a machine without .lent/llvmlite047, first
# call `prepare` carrying .carry/llvmlite047.tar.xz alone, then the measurement carrying .carry/wheels312 and
# .carry/eval (6 MB). A model trained there stays there (.lent/...): pass its path.
# Writes to $OUT: eval_passes.json/.md, tuner_seeds.json/.md, eval.log.
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '2,27p' "$0" >&2
  exit 2
fi
model=$1 steps=${2:-eval,tune}
repo=$PWD
out=${OUT:-/tmp/eval-out}
python=${PYTHON:-python3}
limit=${LIMIT:-500} budget=${BUDGET:-1000} samples=${SAMPLES:-1,10,30} time_limit=${TIME_LIMIT:-240}
workers=${WORKERS:-$(nproc)}
if [ -z "${DEVICE:-}" ]; then
  DEVICE=cpu
  nvidia-smi -L >/dev/null 2>&1 && DEVICE=cuda
fi
work=/tmp/optserve-eval
site=$work/site pkg=$work/pkg corpus=$work/corpus
mkdir -p "$out" "$work" .lent
rm -rf "$pkg" "$corpus" && mkdir -p "$pkg/optserve" "$corpus"

# llvmlite 0.47 once per machine in .lent/ (as corpus/label_remote.sh: a warm machine keeps it between calls).
llvm=$repo/.lent/llvmlite047
(
  flock 9
  if [ ! -f "$llvm/.unpacked" ]; then
    if [ ! -f .carry/llvmlite047.tar.xz ]; then
      echo "no llvmlite 0.47 on this machine: carry .carry/llvmlite047.tar.xz (once per warm machine)" >&2
      exit 2
    fi
    rm -rf "$llvm" && mkdir -p "$llvm" && tar xJf .carry/llvmlite047.tar.xz -C "$llvm" && touch "$llvm/.unpacked"
  fi
) 9>.lent/llvmlite.lock
if [ "$model" = prepare ]; then
  ls -d "$llvm" && exit 0
fi
if [ ! -f "$site/.installed" ]; then
  rm -rf "$site"
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${WHEELS:-.carry/wheels312}"/*.whl
  touch "$site/.installed"
fi
# The package layout pyproject.toml declares, without installing anything (as corpus/label_remote.sh).
cp -r optserve/. "$pkg/optserve/"
for area in compiler engine policies looptune_training kernels serve corpus clients passlm tuning models; do ln -sfn "$repo/$area" "$pkg/optserve/$area"; done
export PYTHONPATH="$pkg:$site:$llvm${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
tar xJf "${CORPUS_ARCHIVE:-.carry/eval/heldout_functions.tar.xz}" -C "$corpus"
cd "$pkg"  # not the repository root: its optserve/ lacks the area subpackages
"$python" -c 'import platform, llvmlite, llvmlite.binding as llvm, pydantic, outlines_core, torch, transformers
assert llvmlite.__version__ == "0.47.0", llvmlite.__version__
print("python", platform.python_version(), "torch", torch.__version__, "transformers", transformers.__version__,
      "llvmlite", llvmlite.__version__, "LLVM", llvm.llvm_version_info, "pydantic", pydantic.VERSION)'
cat "$corpus/heldout.json"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true

# A training run's final/ (or the run holding it) becomes a servable model directory first.
case "$model" in /*) ;; *) model=$repo/$model ;; esac
if [ ! -f "$model/profile.json" ]; then
  run_dir=$model
  [ -d "$model/final" ] || run_dir=$(dirname "$model")
  "$python" -m optserve.passlm.package "$run_dir" --out "$work/model"
  model=$work/model
fi

status=0
if [[ ",$steps," == *",eval,"* ]]; then
  # `optserve eval passes` with only its own command registered (the other commands import what is not here).
  "$python" - eval passes --model-dir "$model" --corpus "$corpus" --split test --limit "$limit" \
    --samples "$samples" --methods greedy,priority,coreset --backend torch --device "$DEVICE" \
    --objective text_size --workers "$workers" --seed 0 --top-k 5 --top-p 1.0 --parallel 1 \
    --time-limit "$time_limit" --no-progress --json-out "$out/eval_passes.json" \
    --journal "$work/eval.journal.jsonl" --report "$out/eval_passes.md" <<'EOF' > "$out/eval.log" 2>&1 || status=$?
import argparse, sys
from optserve.passlm import cli
parser = argparse.ArgumentParser(prog="optserve")
cli.register(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.handler(args))
EOF
  grep -v '^{' "$out/eval.log" | tail -n 40 || true
fi
if [[ ",$steps," == *",tune,"* ]]; then
  "$python" -m optserve.passlm.evaluation.tuner_seeds --model-dir "$model" --corpus "$corpus" --split test \
    --limit "$limit" --objective text_size --budget "$budget" --samples 10 --top-k 5 --workers "$workers" \
    --device "$DEVICE" --time-limit "$time_limit" --json-out "$out/tuner_seeds.json" --report "$out/tuner_seeds.md" \
    2>> "$out/eval.log" \
    || status=$?
  tail -n 5 "$out/eval.log"
fi
ls -l "$out"
exit "$status"
