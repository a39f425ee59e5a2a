#!/usr/bin/env bash
# Issue 36, decisions settled on near ties and timed on the request's threads: benchmarks/looptune_threads.py
# on the lent 16-core host in one `run` call: the held-out suite and sweep (a), the convolutions (c), then
# the held-out suite and sweep again (b) to show how far single decisions swing between runs, each at 1
# thread and every core (looptune_threads_lent.sh). A stage starts only while its estimated time (the first
# stage's) fits before STOP_S seconds; each stage's files are packed as $OUT/<stage>.tar when it ends.
#   [LLVMLITE=host] [STOP_S=420] bash benchmarks/looptune_ties_lent.sh [rounds]
# Here: tar xf a.tar, then looptune_threads.py --report-only --json-out a/looptune_threads_lent.json ...
set -u
ROUNDS=${1:-2}
STOP_S=${STOP_S:-420}
ROOT=${OUT:-/tmp/out}; mkdir -p "$ROOT"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
SECONDS=0
first=0
for stage in a c b; do
  groups="held-out sweep"; [ "$stage" = c ] && groups=conv
  estimate=$first; [ "$stage" = c ] && estimate=$((first / 2))
  if [ $((SECONDS + estimate)) -gt "$STOP_S" ]; then echo "stage $stage skipped at ${SECONDS} s"; continue; fi
  started=$SECONDS
  # shellcheck disable=SC2086
  OUT="$ROOT/$stage" bash benchmarks/looptune_threads_lent.sh "$ROUNDS" $groups
  echo "stage $stage ($groups): $((SECONDS - started)) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
  [ "$stage" = a ] && first=$((SECONDS - started))
  tar cf "$ROOT/$stage.tar" -C "$ROOT" "$stage" && rm -rf "${ROOT:?}/$stage"
done
