#!/usr/bin/env bash
# Issue 36 on the lent AVX-512 Xeon, one `run` call: benchmarks/looptune_subproblem_probe.py (the 512^3
# sub-problem's ranking of tiles against the whole's at 2048^3, 1 thread, vs numpy) with the machine's own
# llvmlite (LLVMLITE=host: kernel timings need no particular LLVM), as benchmarks/looptune_threads_lent.sh
# runs.
#   LLVMLITE=host bash benchmarks/looptune_subproblem_lent.sh [args of looptune_subproblem_probe.py...]
# Writes $OUT/looptune_subproblem_lent.log line by line (a call cut at its limit still returns what ran).
# Budget: ~(warmup + repeats) x 0.15 s per template, kind and round at 2048^3, plus ~15 s of start.
set -u
REPO=$PWD
source benchmarks/looptune_lent_setup.sh
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
python3 -c 'import llvmlite, llvmlite.binding as b; print("llvmlite", llvmlite.__version__, b.get_host_cpu_name())'
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SECONDS=0
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python3 -u "$REPO/benchmarks/looptune_subproblem_probe.py" "$@" 2>&1 \
  | tee "$OUT/looptune_subproblem_lent.log"
echo "exit ${PIPESTATUS[0]} after ${SECONDS} s" | tee -a "$OUT/looptune_subproblem_lent.log"
