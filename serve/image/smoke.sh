#!/usr/bin/env bash
# Start the service in the image (a buildah container on the host's network, as root) and call it from inside
# the image: readiness over HTTP, then one Optimize over gRPC; prints the answer and stops the service. First,
# the image's own command must refuse to start without a token (it listens on 0.0.0.0).
#
#   serve/image/smoke.sh [TAG] [HTTP_PORT] [GRPC_PORT]     # defaults: localhost/optserve:latest 18680 19680
set -euo pipefail
tag=${1:-localhost/optserve:latest}
http_port=${2:-18680}
grpc_port=${3:-19680}
buildah=(buildah --storage-driver vfs)
log=$(mktemp)

repo=$(cd "$(dirname "$0")/../.." && pwd)
container=$("${buildah[@]}" from "$tag")
service=
cleanup() {
  status=$?
  if [ "$status" != 0 ]; then echo "failed; the service's log (last lines):"; tail -n 40 "$log"; fi
  if [ -n "$service" ]; then
    kill -TERM -- "-$service" 2>/dev/null || true  # the service's own process group (setsid below)
    for _ in $(seq 60); do kill -0 -- "-$service" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$service" 2>/dev/null || true
  fi
  "${buildah[@]}" rm "$container" >/dev/null
}
trap cleanup EXIT

# The image's command (`optserve serve --host 0.0.0.0`) without a token: refused before anything starts.
if refused=$("${buildah[@]}" run --isolation chroot "$container" -- optserve serve --host 0.0.0.0 2>&1); then
  echo "the image started on 0.0.0.0 without a token"; exit 1
fi
grep -q "refusing to listen on 0.0.0.0 without a token" <<<"$refused" || { echo "$refused"; exit 1; }
echo "refused without a token: ok"
[ "$("${buildah[@]}" run --isolation chroot "$container" -- id -u)" != 0 ] || { echo "the image runs as root"; exit 1; }
"${buildah[@]}" inspect --format '{{.Docker.Config.Healthcheck.Test}}' "$tag" | grep -q OptserveClient \
  || { echo "the image has no HEALTHCHECK"; exit 1; }
echo "non-root user and HEALTHCHECK: ok"
"${buildah[@]}" copy "$container" "$repo/tests/data/serve/sum.ll" /tmp/sum.ll >/dev/null

# The image's own command, on loopback and unusual ports (the host's network is shared).
setsid "${buildah[@]}" run --isolation chroot "$container" -- \
  optserve serve --host 127.0.0.1 --http-port "$http_port" --grpc-port "$grpc_port" >"$log" 2>&1 &
service=$!

"${buildah[@]}" run --isolation chroot "$container" -- python - "$http_port" "$grpc_port" <<'PY'
import sys, time, urllib.request
from pathlib import Path
from optserve.clients.python.client import OptserveClient

http_port, grpc_port = sys.argv[1:3]
started = time.monotonic()
while True:  # readiness: the model is loaded and every deployment is up
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=5) as answer:
            if answer.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() - started > 600:
        sys.exit("not ready after 600 s")
    time.sleep(2)
print(f"ready after {time.monotonic() - started:.0f} s", flush=True)
ir = Path("/tmp/sum.ll").read_text()  # copied in: the image holds the wheel, not the tests
with OptserveClient(f"127.0.0.1:{grpc_port}", timeout_s=120) as client:
    answer = client.optimize(ir, strategy="priority", samples=10)
print(f"Optimize: best {answer.best.pipeline} cost {answer.best.cost} (-Oz {answer.oz_cost}),"
      f" {len(answer.candidates)} candidates, model {answer.model_id} {answer.model_version}")
PY
echo "service log (last lines):"
tail -n 5 "$log"
