#!/usr/bin/env bash
# One lent-machine call (Xeon, 16 cores): the bundled LoopTune policy against the searches and numpy on the
# test split (workers on cores 1-15), and optionally an earlier policy on the same split for comparison.
#   carry: .carry/llvmlite047.tar.xz [the earlier policy's folder]
#   bash benchmarks/looptune_lent_run.sh <search seconds> <search shapes> [earlier policy.pt]
SEARCH_S=${1:-60}; SHAPES=${2:-20}; EARLIER=$3
REPO=$PWD
source benchmarks/looptune_lent_setup.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
EVAL="python3 -m optserve.looptune_training.cli eval looptune --jobs 15 --first-core 1 --split test"
$EVAL --search-shapes $SHAPES --search-time $SEARCH_S --json-out $OUT/eval.json --out $OUT/looptune.md \
  > $OUT/eval.log 2>&1
echo "evaluation exit $?"; grep -A5 "^### Acceptance" $OUT/looptune.md
if [ -n "$EARLIER" ]; then
  $EVAL --parts policy --policy $REPO/$EARLIER --json-out $OUT/eval_earlier.json --out $OUT/earlier.md \
    > $OUT/eval_earlier.log 2>&1
  echo "earlier policy exit $?"; grep -A3 "^### Acceptance" $OUT/earlier.md
fi
