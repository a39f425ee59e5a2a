#!/usr/bin/env bash
# Issue 36 on the lent AVX-512 Xeon, one `run` call: a 1-thread probe of tiles at 2048^3 against numpy with
# the machine's own llvmlite (LLVMLITE=host: kernel timings need no particular LLVM), as
# benchmarks/looptune_threads_lent.sh runs. The probe by its mode:
#   tile2048:   benchmarks/looptune_tile2048_ab.py (register tiles and cache blocks on the whole 2048^3);
#               ~(warmup + repeats) x 0.2 s per template, kind and round
#   subproblem: benchmarks/looptune_subproblem_probe.py (the sub-problem's ranking of tiles against the
#               whole's); ~(warmup + repeats) x 0.15 s per template, kind and round
# plus ~15 s of start.
#   LLVMLITE=host bash benchmarks/looptune_probe_lent.sh tile2048|subproblem|blockpack [args of the probe...]
# (looptune_tile2048_lent.sh and looptune_subproblem_lent.sh name the mode.) Writes
# $OUT/looptune_<mode>_lent.log line by line (a call cut at its limit still returns what ran).
set -u
MODE=${1:?tile2048, subproblem or blockpack}; shift
case "$MODE" in
  tile2048) PROBE=looptune_tile2048_ab.py ;;
  subproblem) PROBE=looptune_subproblem_probe.py ;;
  blockpack) PROBE=looptune_block_pack_ab.py ;;
  *) echo "unknown mode $MODE (tile2048, subproblem or blockpack)" >&2; exit 2 ;;
esac
REPO=$PWD
source benchmarks/looptune_lent_setup.sh
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
python3 -c 'import llvmlite, llvmlite.binding as b; print("llvmlite", llvmlite.__version__, b.get_host_cpu_name())'
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/looptune_${MODE}_lent.log"
SECONDS=0
# PROBE_THREADS: numpy's (OpenBLAS) threads, for a probe run with --threads (default 1)
OPENBLAS_NUM_THREADS=${PROBE_THREADS:-1} OMP_NUM_THREADS=1 python3 -u "$REPO/benchmarks/$PROBE" "$@" 2>&1 | tee "$LOG"
echo "exit ${PIPESTATUS[0]} after ${SECONDS} s" | tee -a "$LOG"
