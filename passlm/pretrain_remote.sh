#!/usr/bin/env bash
# Pretrain the pass-ordering model on the lent GPU host: every GPU, one torchrun, stopped before the call's limit.
#
# Runs in the repository root on that machine (the `run` tool copies the working tree there; carry the archive's
# folder, e.g. runs/pretrain/carry):
#   passlm/pretrain_remote.sh ARCHIVE SECONDS [passlm/pretrain.py flags ...]
#     ARCHIVE   `python -m optserve.passlm.pretrain_data --archive ...` (manifest + token shards, .tar.xz)
#     SECONDS   the trainer's time limit, counted from its start: it checkpoints and stops before it
#     flags     e.g. --epochs 4 (a new run) or --resume (continue the run in $PRETRAIN_WORK, same flags)
# The run lives in $PRETRAIN_WORK (default .lent/pretrain, git-ignored): a warm machine keeps it between calls, so
# the next call continues bit for bit with --resume; its 320 MB checkpoint does not travel back.
# Writes to $OUT: run.tar.part00.. (final/ in bf16 + log.jsonl, tar split in 15 MiB parts: the run tool brings
# back files of at most 16 MiB), SHA256SUMS, train.log. Here:
#   cat FILES_AT/run.tar.part* | tar x -C runs/pretrain/NAME     # then passlm/train.py --init-from .../final
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
archive=$1 seconds=$2
shift 2
out=${OUT:-/tmp/pretrain-out}
work=${PRETRAIN_WORK:-$PWD/.lent/pretrain}
mkdir -p "$out" "$work/data"
# NVLink multicast stays off (KINDS.md): a program using it can take the host's shared GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=4

stamp=$(sha256sum "$archive" | cut -c1-16)
if [ "$(cat "$work/data/ARCHIVE" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$work/data" && mkdir -p "$work/data"
  tar xJf "$archive" -C "$work/data"
  echo "$stamp" > "$work/data/ARCHIVE"
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
gpus=$(nvidia-smi -L | grep -c '^GPU')

status=0
PYTHONUNBUFFERED=1 torchrun --standalone --nproc_per_node="$gpus" passlm/pretrain.py \
  --data "$work/data" --tokenizer models/passformer --out "$work/run" --time-limit "$seconds" "$@" > "$out/train.log" 2>&1 || status=$?
grep -E '"event"|"val_loss"' "$out/train.log" | cut -c1-400 || true
tail -n 3 "$out/train.log" | cut -c1-400
if [ -d "$work/run/final" ]; then
  tar cf - -C "$work/run" final log.jsonl | split -b 15M -d - "$out/run.tar.part"
  (cd "$out" && sha256sum run.tar.part* > SHA256SUMS)
fi
ls -l "$out"
exit "$status"
