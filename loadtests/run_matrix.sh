#!/usr/bin/env bash
# The load-test matrix of docs/bench/clients.md: gRPC and HTTP, greedy and PS@10 (priority sampling, 10
# candidates), each for RUN_TIME seconds with USERS users, against a running optserve on this host.
#   loadtests/run_matrix.sh [GRPC_TARGET] [HTTP_URL] [OUT_MARKDOWN]
# Environment: USERS (default 4), RUN_TIME (seconds, default 60), OUT (default runs/loadtests).
set -euo pipefail
cd "$(dirname "$0")/.."
GRPC_TARGET=${1:-127.0.0.1:9000}
HTTP_URL=${2:-http://127.0.0.1:8000}
MARKDOWN=${3:-runs/loadtests/summary.md}
USERS=${USERS:-4}
RUN_TIME=${RUN_TIME:-60}
OUT=${OUT:-runs/loadtests}
PYTHON=${PYTHON:-python}
mkdir -p "$OUT" "$(dirname "$MARKDOWN")"

MODEL=$("$PYTHON" -c "
from optserve.clients.python.client import OptserveClient
with OptserveClient('$GRPC_TARGET') as c:
    m = c.model_metadata()
    print(f'\`{m.name}\` version \`{m.version}\` on the {m.backend} backend ({m.platform})')")
{
  echo "## Load: locust against optserve on $(nproc) CPU cores"
  echo
  echo "Date: $(date -u). Model: $MODEL. Each scenario ${RUN_TIME} s headless, ${USERS} users, no think time"
  echo "beyond 0-0.5 s; Optimize:Schedule = 4:1; result cache bypassed. The machine is shared with other"
  echo "work while these ran: numbers are noisy. Command: \`USERS=$USERS RUN_TIME=$RUN_TIME loadtests/run_matrix.sh $GRPC_TARGET $HTTP_URL\`"
  echo
  echo "| scenario | users | requests | RPS | Optimize p50/p95/p99 (ms) | Schedule p50/p95/p99 (ms) | failures |"
  echo "|---|---|---|---|---|---|---|"
} > "$MARKDOWN"
for protocol in grpc http; do
  for strategy_samples in "greedy 1" "priority 10"; do
    set -- $strategy_samples
    "$PYTHON" loadtests/run_headless.py --protocol "$protocol" --strategy "$1" --samples "$2" \
      --users "$USERS" --run-time "$RUN_TIME" --grpc-target "$GRPC_TARGET" --http-url "$HTTP_URL" \
      --out "$OUT" --markdown "$MARKDOWN" > "$OUT/last_run.log"
    tail -1 "$OUT/last_run.log"
  done
done
