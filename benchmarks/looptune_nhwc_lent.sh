#!/usr/bin/env bash
# The NHWC convolutions on the lent 16-core Xeon, one `run` call: every layer of benchmarks/looptune_threads.py's
# conv groups, each cover template (and two wide tiles) with the image columns outside and inside its tile
# loops (kernels/tiling.py `weights_inside`), and the default decision, against torch
# (benchmarks/looptune_nchw_probe.py --kind conv_nhwc --both-ways), then optionally the conv groups of
# benchmarks/looptune_threads.py at 1 thread and every core (looptune_threads_lent.sh).
#   LLVMLITE=host bash benchmarks/looptune_nhwc_lent.sh [probe|threads|both] [rounds]
# Writes $OUT/looptune_nhwc_probe.log and .json per layer group and, for threads, what
# looptune_threads_lent.sh writes.
set -u
WHAT=${1:-both}; ROUNDS=${2:-2}
REPO=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TEMPLATES="2x3rv-k128-r128 4x4rv-k64-r64 6x1rv-k64-v256-r128 4x1vr-k256-v256-r128 12x1rv-k4-v256-r64 12x1rv
  12x2vr-k4-r128 8x2rv-v256-r128 6x4rv-k64-r64 14x2rv"
if [ "$WHAT" != threads ]; then
  (source benchmarks/looptune_lent_setup.sh; cd /tmp
   PROBE="timeout 200 python3 $REPO/benchmarks/looptune_nchw_probe.py --kind conv_nhwc --rounds 3 --decide --both-ways"
   # shellcheck disable=SC2086
   $PROBE --layers conv4 conv5 --templates $TEMPLATES --json-out "$OUT/looptune_nhwc_probe_deep.json"
   # shellcheck disable=SC2086
   $PROBE --layers conv1_2 conv2 conv3 --templates $TEMPLATES --json-out "$OUT/looptune_nhwc_probe_wide.json"
  ) 2>&1 | grep -v compiled | tee "$OUT/looptune_nhwc_probe.log"
fi
if [ "$WHAT" != probe ]; then
  bash benchmarks/looptune_threads_lent.sh "$ROUNDS" conv
fi
