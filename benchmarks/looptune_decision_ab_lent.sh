#!/usr/bin/env bash
# Issue 36 on the lent 16-core Xeon, one `run` call: the quick decision's stopping rule A/B on the sizes
# sweep at 16 threads. "after" is this tree; "before" is the same tree with policies/tiles.py as it was
# before the rule changed (carried as runs/ab_before/tiles.py: git show fb38c12:policies/tiles.py), the
# two run alternately, ROUNDS times each, in one process each (benchmarks/looptune_threads.py --threads).
#   carry: runs/ab_before;  LLVMLITE=host bash benchmarks/looptune_decision_ab_lent.sh [rounds] [threads]
# Writes $OUT/ab_{after,before}_N.{json,log}; compare with benchmarks/looptune_threads.py's JSON fields.
set -u
ROUNDS=${1:-2}; THREADS=${2:-16}
REPO=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/looptune_lent_setup.sh
mkdir -p /tmp/ns_before/optserve
for f in optserve/*.py; do ln -sf "$PWD/$f" /tmp/ns_before/optserve/; done
for d in kernels looptune_training; do ln -sfn "$PWD/$d" /tmp/ns_before/optserve/$d; done
rm -rf /tmp/ns_before/optserve/policies && cp -r policies /tmp/ns_before/optserve/policies
cp runs/ab_before/tiles.py /tmp/ns_before/optserve/policies/tiles.py
cd /tmp
SECONDS=0
for round in $(seq "$ROUNDS"); do
  for side in after before; do
    ns=/tmp/ns; [ "$side" = before ] && ns=/tmp/ns_before
    PYTHONPATH=/tmp/site:$ns:/tmp/stub OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS \
      python3 "$REPO/benchmarks/looptune_threads.py" --threads "$THREADS" --rounds 2 --groups sweep \
      --part "$OUT/ab_${side}_$round.json" > "$OUT/ab_${side}_$round.log" 2>&1
    echo "$side $round exit $? at ${SECONDS} s"
  done
done
python3 - "$OUT" <<'PY'
import json, math, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("ab_*.json")):
    rows = json.loads(path.read_text())["results"]
    ratios = [r["gflops"]["optserve"] / r["gflops"]["numpy"] for r in rows]
    ours = [r["gflops"]["optserve"] for r in rows]
    decisions = sorted(r["decision_s"] for r in rows)
    geo = lambda v: math.exp(sum(map(math.log, v)) / len(v))
    print(f"{path.stem}: vs numpy {geo(ratios):.2f} (worst {min(ratios):.2f}), ours geomean {geo(ours):.0f}"
          f" GFLOPS, decision p50 {decisions[len(decisions) // 2]:.2f} s max {decisions[-1]:.2f} s")
PY
