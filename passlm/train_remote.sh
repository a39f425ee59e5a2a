#!/usr/bin/env bash
# Train the pass-ordering model on the lent GPU while its CPUs label: one call, both jobs.
#
# Runs in the repository root on that machine (the `run` tool copies the working tree there):
#   passlm/train_remote.sh DATA SECONDS "RUN FLAGS" ["RUN FLAGS" ...] -- LABEL_ARGS
#     DATA        training examples (`python -m optserve.passlm.examples`, carried, e.g. runs/passlm2/train.jsonl.xz)
#     SECONDS     each run's time limit (a run stopped by it is checkpointed and writes its final/)
#     RUN FLAGS   one quoted string of `passlm/train.py` flags per run (e.g. "--init-from models/passformer
#                 --steps 300"); the runs go one after the other on the GPU, or at once, one per GPU,
#                 where the machine has a GPU for each
#     LABEL_ARGS  `corpus/label_remote.sh` arguments (BUNDLE STAGE SECONDS flags); none: train only
# Writes $OUT/run<N>.tar.xz (final/ weights + tokenizer and log.jsonl of run N, not the 80 MB checkpoint),
# $OUT/train.log and, when labelling, what label_remote.sh writes ($OUT/labels.tar.xz). The run tool brings back
# at most 8 files from $OUT: four runs, the log and three labellers (LABEL_NAME=...) fill them.
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
data=$1 seconds=$2
shift 2
runs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do runs+=("$1"); shift; done
[ $# -gt 0 ] && shift
out=${OUT:-/tmp/train-out}
# TRAIN_WORK=$PWD/.lent keeps each run's checkpoint in the git-ignored .lent/, which the run tool leaves on a warm
# machine: the next call (within its idle time) continues a run with "--resume" in its flags.
work=${TRAIN_WORK:-/tmp}
mkdir -p "$out"

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
train_one() {  # train_one N: run N's flags; on GPU N when every run has a GPU of its own
  local i=$1
  echo "== run$i: ${runs[$i]}"
  # shellcheck disable=SC2086  # each run's flags are one string on purpose
  PYTHONUNBUFFERED=1 python3 passlm/train.py --data "$data" --tokenizer models/passformer \
    --out "$work/passlm-run$i" --time-limit "$seconds" ${runs[$i]} || echo "run$i failed"
  # TRAIN_FINAL_STAYS=1: only the log comes back (a 27M model's final/ is over the 16 MiB a file may be; it stays
  # in $TRAIN_WORK for the next call on the warm machine, e.g. passlm/eval_remote.sh)
  if [ "${TRAIN_FINAL_STAYS:-0}" = 1 ]; then
    tar cJf "$out/run$i.tar.xz" -C "$work/passlm-run$i" log.jsonl || true
  else
    tar cJf "$out/run$i.tar.xz" -C "$work/passlm-run$i" final log.jsonl || true
  fi
}
# A several-GPU machine (the 4-GPU host lent as nvidia-h100-x4) trains the runs at once, one per GPU, so a
# call's time limit covers them all; else they go one after the other on the one GPU.
if [ "${#runs[@]}" -gt 1 ] && [ "${gpus:-0}" -ge "${#runs[@]}" ]; then
  (
    for i in "${!runs[@]}"; do
      CUDA_VISIBLE_DEVICES=$i train_one "$i" > "$out/train.run$i.log" 2>&1 &
    done
    wait
    cat "$out"/train.run*.log
    rm -f "$out"/train.run*.log
  ) > "$out/train.log" 2>&1 &
else
  (
    for i in "${!runs[@]}"; do train_one "$i"; done
  ) > "$out/train.log" 2>&1 &
fi
trainer=$!

if [ $# -gt 0 ]; then
  # Each trainer keeps one core; the labeller takes the rest.
  LABEL_WORKERS=${LABEL_WORKERS:-$(( $(nproc) - ${#runs[@]} ))} bash corpus/label_remote.sh "$@" || echo "labelling failed" >&2
fi
wait "$trainer"
grep -E '"val_|== run|failed' "$out/train.log" | cut -c1-200 || true
ls -l "$out"
