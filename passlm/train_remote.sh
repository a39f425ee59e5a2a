#!/usr/bin/env bash
# Train the pass-ordering model on the lent GPU while its CPUs label: one call, both jobs.
#
# Runs in the repository root on that machine (the `run` tool copies the working tree there):
#   passlm/train_remote.sh DATA SECONDS TRAIN_FLAGS -- LABEL_ARGS
#     DATA         training examples (`python -m optserve.passlm.examples`, carried, e.g. runs/passlm2/train.jsonl.xz)
#     SECONDS      the training time limit (the run is checkpointed and its final/ written when it stops)
#     TRAIN_FLAGS  more `passlm/train.py` flags (e.g. --init-from models/passformer --steps 1200)
#     LABEL_ARGS   `corpus/label_remote.sh` arguments (BUNDLE STAGE SECONDS flags); none: train only
# Writes $OUT/run.tar.xz (final/ weights + tokenizer, log.jsonl; not the 80 MB checkpoint) and, when labelling,
# what label_remote.sh writes ($OUT/labels.tar.xz, $OUT/label_summary.json).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
data=$1 seconds=$2
shift 2
train_flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do train_flags+=("$1"); shift; done
[ $# -gt 0 ] && shift
out=${OUT:-/tmp/train-out}
run=/tmp/passlm-run
mkdir -p "$out" "$run"

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
PYTHONUNBUFFERED=1 python3 passlm/train.py --data "$data" --tokenizer models/passformer --out "$run" \
  --time-limit "$seconds" "${train_flags[@]}" > "$out/train.log" 2>&1 &
trainer=$!

if [ $# -gt 0 ]; then
  # The trainer keeps one core; the labeller takes the rest.
  LABEL_WORKERS=$(( $(nproc) - 1 )) bash corpus/label_remote.sh "$@" || echo "labelling failed" >&2
fi
status=0
wait "$trainer" || status=$?
tail -n 5 "$out/train.log"
tar cJf "$out/run.tar.xz" -C "$run" final log.jsonl
ls -l "$out"
exit "$status"
