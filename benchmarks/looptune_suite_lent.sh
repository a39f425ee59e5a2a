#!/usr/bin/env bash
# One lent-machine call (Xeon, AVX-512): the held-out suite of issue 19 on one pinned core (core 1), with the
# tile cover bundled from the development machine, and with `relearn` first a cover learned there
# (benchmarks/looptune_tiles.py, ~4 min), which the suite then uses. Not run yet (see BENCHMARKS.md).
#   carry: .carry/llvmlite047.tar.xz        (the lent machine has torch, numpy; matplotlib only for the plot)
#   bash benchmarks/looptune_suite_lent.sh <search seconds> [relearn]
SEARCH_S=${1:-60}; RELEARN=$2
REPO=$PWD
source benchmarks/looptune_lent_setup.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
PIN="taskset -c 1"
if [ "$RELEARN" = relearn ]; then
  $PIN python3 $REPO/benchmarks/looptune_tiles.py --out $OUT/tiles.json --data-out $OUT/tiles_data.json \
    > $OUT/tiles.log 2>&1
  echo "cover exit $?"; tail -3 $OUT/tiles.log
  cp $OUT/tiles.json $REPO/models/looptune/tiles.json  # this copy of the repository only
fi
$PIN python3 $REPO/benchmarks/looptune_suite.py --search-time $SEARCH_S --rounds 3 \
  --out $OUT/looptune_suite.md --json-out $OUT/looptune_suite.json > $OUT/suite.log 2>&1
echo "suite exit $?"; sed -n '/^| kind/,/^| \*\*all/p' $OUT/looptune_suite.md
