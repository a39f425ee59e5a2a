#!/usr/bin/env bash
# Issue 36 on the lent AVX-512 Xeon, one `run` call: benchmarks/looptune_subproblem_probe.py (the
# sub-problem's ranking of tiles against the whole's at 2048^3, 1 thread, vs numpy), through
# benchmarks/looptune_probe_lent.sh.
#   LLVMLITE=host bash benchmarks/looptune_subproblem_lent.sh [args of looptune_subproblem_probe.py...]
# Writes $OUT/looptune_subproblem_lent.log.
exec bash benchmarks/looptune_probe_lent.sh subproblem "$@"
