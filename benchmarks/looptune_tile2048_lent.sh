#!/usr/bin/env bash
# Issue 36 on the lent AVX-512 Xeon, one `run` call: benchmarks/looptune_tile2048_ab.py (register tiles and
# cache blocks on 2048^3 at 1 thread, vs numpy), through benchmarks/looptune_probe_lent.sh.
#   LLVMLITE=host bash benchmarks/looptune_tile2048_lent.sh [args of looptune_tile2048_ab.py...]
# Writes $OUT/looptune_tile2048_lent.log.
exec bash benchmarks/looptune_probe_lent.sh tile2048 "$@"
