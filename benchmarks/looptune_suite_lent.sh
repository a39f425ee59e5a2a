#!/usr/bin/env bash
# Issue 19 on the lent 16-core AVX-512 Xeon, one `run` call per part (each well under the 10-minute limit).
# No Ray, no pydantic, no clang, no network there, Python 3.12: benchmarks/looptune_lent_setup.sh puts our
# llvmlite 0.47 (carried) and an `optserve` namespace on the path. One process per core (cores 1..WORKERS;
# core 0 is left to the system), each timing its share of the shapes in interleaved rounds; the shards'
# JSON files are merged into one report.
#   carry: .carry/llvmlite047.tar.xz
#   bash benchmarks/looptune_suite_lent.sh suite <search seconds> [relearn | COVER]  # held-out suite, 22 shapes
#   bash benchmarks/looptune_suite_lent.sh sizes <search seconds> [relearn | COVER]  # GFLOPS vs size, 48 shapes
#   bash benchmarks/looptune_suite_lent.sh packing   # each operand layout of the 4 matmuls at 256^3, 512^3 (~3 min)
# `relearn` first learns the tile cover there (150 templates x 45 training shapes, sharded, < 1 min), which
# the decisions then use (in this copy of the repository only; it comes back as $OUT/tiles.json); COVER, a
# carried tiles.json (an earlier call's), is used instead of the bundled one. At 60 s of search per shape
# on 15 cores: suite ~4 min, sizes ~6 min.
# Writes $OUT/looptune_<part>.md and .json; the plot is drawn here from the JSON (matplotlib):
#   python benchmarks/looptune_<part>.py --merge looptune_<part>.json --out docs/bench/looptune_<part>_lent.md \
#     --json-out runs/looptune_<part>_lent.json --command "bash benchmarks/looptune_suite_lent.sh <args>"
set -u
PART=${1:?suite, sizes or packing}; SEARCH_S=${2:-60}; RELEARN=${3:-}
REPO=$PWD
WORKERS=${WORKERS:-$(($(nproc) - 1))}
source benchmarks/looptune_lent_setup.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/parts"
cd /tmp  # so that `optserve` resolves to the /tmp/ns namespace, not the repository's optserve/ folder
python3 -c 'import llvmlite; assert llvmlite.__version__ == "0.47.0", llvmlite.__version__' || exit 1
if [ "$PART" = packing ]; then  # one process on core 1 (benchmarks/looptune_packing.py, the bundled cover)
  taskset -c 1 python3 "$REPO/benchmarks/looptune_packing.py" --kinds "A·B,A^T·B,A·B^T,A^T·B^T" \
    --variants blocked,a-transposed,a-packed --sizes 256,512 --rounds 3 \
    --json-out "$OUT/looptune_packing.json" 2>&1 | tee "$OUT/looptune_packing.log"
  exit "${PIPESTATUS[0]}"
fi
case $PART in
  suite|sizes) SCRIPT=$REPO/benchmarks/looptune_$PART.py ;;
  *) echo "part must be suite, sizes or packing" >&2; exit 2 ;;
esac

sharded() {  # sharded NAME ARGS...: `python3 ARGS --shard k/WORKERS` on core k+1 ({k} in ARGS: k), all at once
  local name=$1; shift
  for k in $(seq 0 $((WORKERS - 1))); do
    taskset -c $((k + 1)) python3 "${@//\{k\}/$k}" --shard $k/$WORKERS > "$OUT/parts/$name.$k.log" 2>&1 &
  done
  wait
  local done=$(ls "$OUT"/parts/$name.*.json 2>/dev/null | wc -l)
  echo "$name: $done of $WORKERS shards wrote results (${SECONDS} s so far)"
  [ "$done" = "$WORKERS" ] || { MISSING=1; tail -n 3 "$OUT"/parts/$name.*.log; }
}
MISSING=0

SECONDS=0
if [ "$RELEARN" = relearn ]; then
  sharded tiles "$REPO/benchmarks/looptune_tiles.py" --data-out "$OUT/parts/tiles.{k}.json"
  [ "$MISSING" = 0 ] || { echo "cover not learned: shapes are missing" >&2; exit 1; }
  python3 "$REPO/benchmarks/looptune_tiles.py" --merge "$OUT"/parts/tiles.*.json --out "$OUT/tiles.json" \
    --data-out "$OUT/tiles_data.json" > "$OUT/tiles.log" 2>&1
  echo "cover exit $?"; grep -A1 '"cover"' "$OUT/tiles.json" | head -3
  cp "$OUT/tiles.json" "$REPO/models/looptune/tiles.json"  # this copy of the repository only
elif [ -n "$RELEARN" ]; then
  case $RELEARN in /*) COVER=$RELEARN ;; *) COVER=$REPO/$RELEARN ;; esac
  cp "$COVER" "$REPO/models/looptune/tiles.json" || exit 1
  echo "cover from $RELEARN"
fi
sharded "$PART" "$SCRIPT" --search-time "$SEARCH_S" --rounds 3 --out "$OUT/parts/$PART.{k}.md" \
  --json-out "$OUT/parts/$PART.{k}.json"
python3 "$SCRIPT" --merge "$OUT"/parts/$PART.*.json --out "$OUT/looptune_$PART.md" \
  --json-out "$OUT/looptune_$PART.json" --command "bash benchmarks/looptune_suite_lent.sh $*" \
  --note "lent machine: $WORKERS processes at once, one per core (1..$WORKERS), each timing its shapes in interleaved rounds" \
  > "$OUT/merge.log" 2>&1
echo "merge exit $? after ${SECONDS} s"
sed -n '/^| kind |/,/^$/p' "$OUT/looptune_$PART.md" | head -30
grep -m1 "inference" "$OUT/looptune_$PART.md"
[ "$MISSING" = 0 ] || { echo "some shards wrote no results: the report misses their shapes" >&2; exit 1; }
