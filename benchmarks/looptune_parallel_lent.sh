#!/usr/bin/env bash
# Issue 36 on the lent 16-core Xeon, one `run` call: where a parallel kernel's time goes on every core
# (benchmarks/looptune_parallel_profile.py: hand-over, packed copies, nests, Python threads vs the OpenMP
# team, numpy), then optionally benchmarks/looptune_threads.py (1 thread and every core).
#   LLVMLITE=host bash benchmarks/looptune_parallel_lent.sh [profile|threads|both] [rounds] [groups...]
# Writes $OUT/looptune_parallel_profile.{log,json} and, for threads, what looptune_threads_lent.sh writes.
set -u
WHAT=${1:-both}; shift || true
REPO=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ "$WHAT" != threads ]; then
  (source benchmarks/looptune_lent_setup.sh; cd /tmp; CORES=$(nproc --all)  # plain nproc reads OMP_NUM_THREADS (1 here)
   OPENBLAS_NUM_THREADS=$CORES OMP_NUM_THREADS=$CORES timeout 200 python3 \
     "$REPO/benchmarks/looptune_parallel_profile.py" --threads "$CORES" \
     --json-out "$OUT/looptune_parallel_profile.json" > "$OUT/looptune_parallel_profile.log" 2>&1
   echo "profile exit $?"; grep -v '^{' "$OUT/looptune_parallel_profile.log" | tail -n 20)
fi
if [ "$WHAT" != profile ]; then
  bash benchmarks/looptune_threads_lent.sh "$@"
fi
