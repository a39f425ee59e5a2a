#!/usr/bin/env bash
# Issue 36 on the lent 16-core Xeon, one `run` call: the NCHW layers left below 0.8x torch at 1 thread,
# template by template and the default decision against torch (benchmarks/looptune_nchw_probe.py), then
# optionally the whole benchmarks/looptune_threads.py at 1 thread and every core (looptune_threads_lent.sh).
#   LLVMLITE=host bash benchmarks/looptune_nchw_lent.sh [probe|threads|both] [rounds]
# Writes $OUT/looptune_nchw_probe.{log,json} and, for threads, what looptune_threads_lent.sh writes.
set -u
WHAT=${1:-both}; ROUNDS=${2:-2}
REPO=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ "$WHAT" != threads ]; then
  (source benchmarks/looptune_lent_setup.sh; cd /tmp
   PROBE="timeout 150 python3 $REPO/benchmarks/looptune_nchw_probe.py --rounds 3 --decide"
   $PROBE --layers conv1_2 --templates 4x4rv-k64-r64-u 2x3rv-k128-r128-u 8x2rv-v256-r128-u 4x4rv-k64-r64 \
     --json-out "$OUT/looptune_nchw_probe_conv1_2.json"
   $PROBE --layers conv5 conv4 --templates 4x4rv-k64-r64 8x2rv-v256-r128 14x2rv 7x4rv 12x1rv \
     --json-out "$OUT/looptune_nchw_probe_conv5.json"
   $PROBE --layers reduce --templates 2x3rv-k128-r128 8x2rv-v256-r128 14x2rv 12x1rv \
     --json-out "$OUT/looptune_nchw_probe_reduce.json") 2>&1 | grep -v compiled | tee "$OUT/looptune_nchw_probe.log"
fi
if [ "$WHAT" != probe ]; then
  bash benchmarks/looptune_threads_lent.sh "$ROUNDS"
fi
