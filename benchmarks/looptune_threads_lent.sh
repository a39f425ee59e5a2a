#!/usr/bin/env bash
# Issue 36 on the lent 16-core AVX-512 Xeon, one `run` call: benchmarks/looptune_threads.py (held-out suite,
# sizes to 2048, CNN convolutions in NCHW and NHWC vs numpy and torch) at 1 thread and at every core, with
# the bundled tile cover. Torch and numpy are the machine's own; llvmlite 0.47 and the `optserve` namespace
# come from benchmarks/looptune_lent_setup.sh.
#   carry: .carry/llvmlite047.tar.xz, or nothing with LLVMLITE=host (the machine's own llvmlite: kernel
#   timings need no particular LLVM; the report names the one used)
#   [LLVMLITE=host] [WARM_S=20] bash benchmarks/looptune_threads_lent.sh [rounds] [groups...]
# WARM_S: seconds of numpy 2048^3 matmuls on one thread first (a freshly started machine ran every kernel
# about a quarter slower for its first minute or two; docs/bench/looptune_all_cores.md, footnote 5)
# Writes $OUT/looptune_threads_lent.md and .json; here:
#   python benchmarks/looptune_threads.py --report-only --json-out runs/looptune_threads_lent.json \
#     --out docs/bench/looptune_threads_lent.md
set -u
ROUNDS=${1:-3}; shift || true
REPO=$PWD
source benchmarks/looptune_lent_setup.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
if [ "${LLVMLITE:-}" != host ]; then
  python3 -c 'import llvmlite; assert llvmlite.__version__ == "0.47.0", llvmlite.__version__' || exit 1
fi
LLVM=$(python3 -c 'import llvmlite.binding as b; import llvmlite; print(f"llvmlite {llvmlite.__version__}, LLVM {b.llvm_version_info}")')
GROUPS_ARG=""; [ $# -gt 0 ] && GROUPS_ARG="--groups $*"
if [ "${WARM_S:-0}" -gt 0 ]; then
  OPENBLAS_NUM_THREADS=1 python3 -c "import time, numpy as np
a = np.ones((2048, 2048), np.float32); t = time.time()
while time.time() - t < ${WARM_S}: a @ a"
  echo "warmed ${WARM_S} s; load $(cut -d' ' -f1-3 /proc/loadavg)"
fi
SECONDS=0
python3 "$REPO/benchmarks/looptune_threads.py" --rounds "$ROUNDS" $GROUPS_ARG \
  --out "$OUT/looptune_threads_lent.md" --json-out "$OUT/looptune_threads_lent.json" \
  --note "lent machine, not shared during the run; $LLVM" > "$OUT/looptune_threads_lent.log" 2>&1
echo "exit $? after ${SECONDS} s"
sed -n '/^## Summary/,/^## Every/p' "$OUT/looptune_threads_lent.md"
tail -n 5 "$OUT/looptune_threads_lent.log"
