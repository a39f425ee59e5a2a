"""gRPC over TLS: the TLS front's (serve/edges/grpc_tls.py) cost per call, and its answer to
garbage.

Starts its own service (local Ray, tiny stand-in model, the serve tests' settings) with a self-signed
certificate on ports 48100 / 49100 (plaintext gRPC) / 49543 (gRPC over TLS), then, one call at a time:
latency of health Check and of a cached Optimize over plaintext gRPC and through the TLS front, the cost of
a fresh TLS channel (handshake + first call), and random byte strings sent as an OptimizeRequest to both
ports, counted by the status each answered.

    nice -n 10 python benchmarks/reliability_grpc_tls.py --calls 300 --garbage 1000
    # -> section grpc_tls of docs/bench/reliability.md
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter

import grpc

from optserve.testing.reliability_report import REPO, machine, utc_now, write_section
from optserve.testing.service import TOKEN, build_tiny_model, service_settings
from optserve.testing.tls import make_self_signed_cert

OUT = REPO / "runs" / "reliability_grpc_tls"
HTTP_PORT, GRPC_PORT, GRPC_TLS_PORT = 48100, 49100, 49543
ADD_IR = (REPO / "tests" / "data" / "serve" / "add.ll").read_text()
AUTH = (("authorization", f"Bearer {TOKEN}"),)


def latencies_ms(call, n: int) -> list[float]:
    call()  # warm: connection and, for Optimize, the result cache
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"{statistics.median(ordered):.2f} | {p99:.2f} | {statistics.mean(ordered):.2f}"


def garbage_outcomes(channel: grpc.Channel, payloads: list[bytes]) -> Counter:
    call = channel.unary_unary("/optserve.v1.PassOrdering/Optimize")
    outcomes: Counter = Counter()
    for payload in payloads:
        try:
            call(payload, timeout=60, metadata=AUTH)
            outcomes["OK"] += 1
        except grpc.RpcError as err:
            outcomes[err.code().name] += 1
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per case")
    parser.add_argument("--handshakes", type=int, default=30, help="fresh TLS channels timed")
    parser.add_argument("--garbage", type=int, default=1000, help="random payloads per port")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from optserve.clients.python.client import OptserveClient
    from optserve.serve import server

    OUT.mkdir(parents=True, exist_ok=True)
    cert, key = make_self_signed_cert(OUT)
    settings = service_settings(
        build_tiny_model(OUT / "tiny-model"),
        http_port=HTTP_PORT,
        grpc_port=GRPC_PORT,
        grpc_tls_port=GRPC_TLS_PORT,
        tls_certfile=str(cert),
        tls_keyfile=str(key),
    )
    endpoints = server.start(settings)
    rows = []
    try:
        plain = OptserveClient(endpoints.grpc_target, token=TOKEN)
        tls = OptserveClient(endpoints.grpc_tls_target, token=TOKEN, ca_cert=cert)
        for name, client in (("plaintext (Ray Serve proxy)", plain), ("TLS front -> proxy", tls)):
            health = latencies_ms(client.health, args.calls)
            optimize = latencies_ms(lambda c=client: c.optimize(ADD_IR), args.calls)
            rows.append((name, summary(health), summary(optimize)))
            print(name, "health", summary(health), "optimize (cached)", summary(optimize), flush=True)

        def fresh_channel():
            with OptserveClient(endpoints.grpc_tls_target, ca_cert=cert, timeout_s=30) as client:
                assert client.health() == "SERVING"

        handshakes = latencies_ms(fresh_channel, args.handshakes)
        print("fresh TLS channel + health", summary(handshakes), flush=True)

        rng = random.Random(0)
        payloads = [rng.randbytes(rng.randrange(1, 513)) for _ in range(args.garbage)]
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(endpoints.grpc_tls_target, credentials) as channel:
            tls_outcomes = garbage_outcomes(channel, payloads)
        with grpc.insecure_channel(endpoints.grpc_target) as channel:
            plain_outcomes = garbage_outcomes(channel, payloads)
        print("garbage through TLS:", dict(tls_outcomes), "plaintext:", dict(plain_outcomes), flush=True)
        still = tls.health(), plain.health()
        answer = tls.optimize(ADD_IR)
        assert still == ("SERVING", "SERVING") and answer.best.cost <= answer.oz_cost
        plain.close()
        tls.close()
    finally:
        server.stop()
    if args.no_write:
        return
    command = (
        f"nice -n 10 python benchmarks/reliability_grpc_tls.py --calls {args.calls} --garbage {args.garbage}"
    )
    table = "\n".join(f"| {name} | {health} | {optimize} |" for name, health, optimize in rows)
    codes = sorted(set(tls_outcomes) | set(plain_outcomes))
    garbage_rows = "\n".join(f"| {code} | {tls_outcomes[code]} | {plain_outcomes[code]} |" for code in codes)
    write_section(
        "grpc_tls",
        f"""## gRPC over TLS: the TLS front's cost and its answer to garbage

- date: {utc_now()}; machine: {machine()} (shared with other jobs; `nice -n 10`)
- command: `{command}`
- service: local Ray, tiny stand-in model, self-signed ECDSA P-256 certificate; one call at a time over
  loopback; the TLS front relays to Ray Serve's plaintext gRPC proxy on the same host

Latency per call in ms ({args.calls} calls each after one warm-up; Optimize is a result-cache hit, so the
numbers are transport + ingress, not compilation):

| path | health p50 | health p99 | health mean | Optimize p50 | Optimize p99 | Optimize mean |
|---|---|---|---|---|---|---|
{table}

A fresh TLS channel (TCP + TLS handshake + one health call), {args.handshakes} times: p50 | p99 | mean =
{summary(handshakes)} ms.

{args.garbage} random byte strings (1–512 bytes, seed 0) sent as an `OptimizeRequest` (with the token) to
each port, counted by the status answered:

| status | TLS front | plaintext gRPC |
|---|---|---|
{garbage_rows}

Byte strings that happen to be valid protobuf (unknown fields are legal) pass the front's parse and reach the
service, which refuses them for what they say (e.g. no IR: INVALID_ARGUMENT from the ingress). On the
plaintext port the proxy passes the raw bytes on and the ingress parses them (serve/edges/grpc_services.py).
The service answered health and a valid Optimize afterwards on both ports. """,
    )


if __name__ == "__main__":
    main()
