"""Benchmark the service end to end, each engine backend as `make serve` runs it, side by side in one run.

    python benchmarks/serve_bench.py [--backends torch,vllm] [--requests 30] [--ps-requests 15]
        [--baseline-venv OTHER_CHECKOUT/.venv]

For each backend it starts `optserve serve --config FILE` (the command `make serve` runs: local Ray, Ray
Serve, the bundled model, compiler workers; own ports 184xx/194xx) and waits for its model to be ready; all
services stay up together, so every backend sees the same machine. Then, over gRPC:
- latency with one client: greedy and priority sampling with 10 samples (PS@10), each request a fresh compile
  (`bypass_cache`) of a different small -O0 function (normalized IR <= 2 KB: the functions of tests/data/c and
  tests/data/serve, then seeded synthetic ones), requests alternating between the backends so that both see
  the same load; service overhead = wall time minus the model and compile time the answer reports;
- throughput with `--concurrency` clients, one backend after the other;
- the latency of a result-cache hit, and cold start (process start to the model ready, then a first answer).
With --baseline-venv, each backend is also started from that virtualenv's `optserve` (another checkout, e.g.
main's), labelled "(baseline)", in the same run: a change measured before and after under the same load.

Without --model-dir it uses models/passformer, or builds the untrained tiny stand-in model under
data/serve_bench/ when that is missing. Writes a markdown section to docs/bench/serve.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "bench" / "serve.md"
HTTP_PORT, GRPC_PORT = 18400, 19400  # + the backend's index
MAX_FUNCTION_BYTES = 2048
CLANG = ["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-S", "-x", "c"]
STARTUP_TIMEOUT_S = 600


def model_directory(requested: str | None) -> tuple[Path, str]:
    if requested:
        return Path(requested), "given"
    bundled = REPO / "models" / "passformer"
    if (bundled / "profile.json").is_file():
        return bundled, "bundled"
    tiny = REPO / "data" / "serve_bench" / "tiny-model"
    if not (tiny / "profile.json").is_file():
        print(f"building the tiny stand-in model in {tiny}", flush=True)
        subprocess.run([sys.executable, "-m", "optserve.passlm.tiny_model", str(tiny)], check=True)
    return tiny, "tiny untrained stand-in"


def workload(count: int) -> list[str]:
    """`count` different -O0 functions of at most 2 KB normalized IR, real ones first (the shape optcc sends).

    Different functions: vLLM's prefix cache would otherwise answer a repeated prompt without a prefill.
    """
    from optserve.compiler.ir import normalize_ir, split_functions
    from optserve.passlm.tiny_model import synthetic_function

    modules = [path.read_text() for path in sorted((REPO / "tests" / "data" / "serve").glob("*.ll"))]
    for source in sorted((REPO / "tests" / "data" / "c").glob("*.c")):
        module = subprocess.run([*CLANG, str(source), "-o", "-"], check=True, capture_output=True, text=True)
        modules += [ir for _, ir in split_functions(module.stdout)]
    rng = random.Random(0)
    while len(modules) < 4 * count:
        modules.append(synthetic_function(rng, "f"))
    small, seen = [], set()
    for module in modules:
        normalized = normalize_ir(module)
        if len(normalized) <= MAX_FUNCTION_BYTES and normalized not in seen:
            seen.add(normalized)
            small.append(module)
    return small[:count]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class Service:
    """One `optserve serve` process (one backend) and a gRPC client of it."""

    def __init__(self, backend: str, index: int, model_dir: Path, workdir: Path, venv: Path | None = None):
        self.backend = backend
        self.label = backend if venv is None else f"{backend} (baseline)"
        config = workdir / f"{backend}-{index}.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "engine": {"model_dir": str(model_dir), "backend": backend},
                    "serve": {
                        "http_port": HTTP_PORT + index,
                        "grpc_port": GRPC_PORT + index,
                        "max_queued_requests": 256,
                    },
                }
            )
        )
        self.log = (workdir / f"{backend}-{index}.log").open("w")
        optserve = venv / "bin" / "optserve" if venv else Path(sys.executable).with_name("optserve")
        command = [str(optserve), "serve", "--config", str(config)]
        self.started = time.perf_counter()
        # its own process group: stopping it also stops the Ray processes it started
        self.process = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.target = f"127.0.0.1:{GRPC_PORT + index}"
        self.client = None
        self.cold: dict[str, float] = {}

    def wait_ready(self, first_module: str):
        from optserve.clients.python.client import CallError, OptserveClient

        self.client = OptserveClient(self.target, timeout_s=600)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"optserve serve ({self.label}) exited; see {self.log.name}")
            if time.perf_counter() - self.started > STARTUP_TIMEOUT_S:
                raise RuntimeError(f"optserve serve ({self.label}) not ready in {STARTUP_TIMEOUT_S} s")
            try:
                metadata = self.client.model_metadata()
                if metadata.ready:
                    break
            except CallError:
                pass
            time.sleep(1)
        ready = time.perf_counter()
        self.client.optimize(first_module)
        self.cold = {"ready_s": ready - self.started, "first_answer_s": time.perf_counter() - ready}
        self.metadata = metadata
        print(f"{self.label}: cold start {self.cold}", flush=True)

    def optimize(self, module: str, **options) -> tuple[float, object]:
        started = time.perf_counter()
        response = self.client.optimize(module, bypass_cache=True, **options)
        return time.perf_counter() - started, response

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        self.process.send_signal(signal.SIGTERM)  # optserve serve stops Serve and Ray on SIGTERM
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):  # whatever Ray process outlived it
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


def summarize(results: list[tuple[float, object]], wall: float | None = None) -> dict:
    latencies = [seconds for seconds, _ in results]
    responses = [response for _, response in results]
    overheads = [s - r.timings.sample_s - r.timings.compile_s for s, r in results]
    summary = {
        "requests": len(results),
        "p50_ms": 1e3 * percentile(latencies, 50),
        "p99_ms": 1e3 * percentile(latencies, 99),
        "mean_ms": 1e3 * statistics.fmean(latencies),
        "candidates": statistics.fmean(len(r.candidates) for r in responses),
        "beat_oz": sum(r.best.cost < r.oz_cost for r in responses),
        "sample_p50_ms": 1e3 * percentile([r.timings.sample_s for r in responses], 50),
        "compile_p50_ms": 1e3 * percentile([r.timings.compile_s for r in responses], 50),
        "overhead_p50_ms": 1e3 * percentile(overheads, 50),
        # the overhead's two parts: outside the ingress (gRPC, Serve's proxy and its hop to the ingress
        # replica, both ways) and inside it besides model and compile time (IR validation, cache, response)
        "outside_ingress_p50_ms": 1e3 * percentile([s - r.timings.total_s for s, r in results], 50),
        "in_ingress_p50_ms": 1e3
        * percentile([r.timings.total_s - r.timings.sample_s - r.timings.compile_s for r in responses], 50),
    }
    if wall is not None:
        summary["throughput_rps"] = len(results) / wall
    return summary


def latency_side_by_side(services: list[Service], modules: list[str], **options) -> dict[str, dict]:
    """One client; each function goes to every backend in turn (the order rotating), so loads match."""
    results: dict[str, list] = {s.label: [] for s in services}
    for i, module in enumerate(modules):
        for service in services[i % len(services) :] + services[: i % len(services)]:
            results[service.label].append(service.optimize(module, **options))
    return {backend: summarize(rows) for backend, rows in results.items()}


def throughput(service: Service, modules: list[str], concurrency: int, **options) -> dict:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        rows = list(pool.map(lambda module: service.optimize(module, **options), modules))
    return summarize(rows, time.perf_counter() - started)


def cache_hit_latency(service: Service, module: str, repeats: int = 30) -> float:
    service.client.optimize(module)
    latencies = []
    for _ in range(repeats):
        started = time.perf_counter()
        assert service.client.optimize(module).cached
        latencies.append(time.perf_counter() - started)
    return 1e3 * percentile(latencies, 50)


def round_trips(service: Service, repeats: int = 100) -> dict[str, float]:
    """p50 ms of the two bare trips in the overhead: to Serve's gRPC proxy alone (its own Healthz) and on
    through it to the ingress replica and back (health Check of the server, no work in the ingress)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from ray.serve.generated import serve_pb2, serve_pb2_grpc

    channel = service.client.channel
    calls = {
        "proxy_ms": lambda: serve_pb2_grpc.RayServeAPIServiceStub(channel).Healthz(
            serve_pb2.HealthzRequest(), timeout=30
        ),
        "ingress_ms": lambda: health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=30
        ),
    }
    trips = {}
    for name, trip in calls.items():
        latencies = []
        for _ in range(repeats):
            started = time.perf_counter()
            trip()
            latencies.append(time.perf_counter() - started)
        trips[name] = 1e3 * percentile(latencies, 50)
    return trips


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    cores = len(os.sched_getaffinity(0))
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cores} CPU cores ({cpu}), {memory_gib:.0f} GiB RAM, no GPU, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir")
    parser.add_argument("--backends", default="torch,vllm", help="comma-separated: torch, vllm")
    parser.add_argument("--requests", type=int, default=30, help="requests per greedy measurement")
    parser.add_argument("--ps-requests", type=int, default=15, help="requests per PS@10 measurement")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--output", type=Path, default=OUT)
    parser.add_argument("--baseline-venv", type=Path, help="also run each backend from this virtualenv")
    args = parser.parse_args()

    model_dir, model_kind = model_directory(args.model_dir)
    backends = args.backends.split(",")
    modules = workload(1 + 2 * max(args.requests, args.ps_requests))
    first, latency_set, throughput_set = modules[0], modules[1::2], modules[2::2]
    load_before = os.getloadavg()[0]
    rows: list[tuple[str, str, int, dict]] = []
    with tempfile.TemporaryDirectory() as workdir:
        services = []
        try:
            venvs = [None] if args.baseline_venv is None else [args.baseline_venv, None]
            runs = [(backend, venv) for venv in venvs for backend in backends]
            for index, (backend, venv) in enumerate(runs):  # one at a time: cold starts do not overlap
                services.append(Service(backend, index, model_dir, Path(workdir), venv))
                services[-1].wait_ready(first)
            for label, options, count in (
                ("greedy", {"strategy": "greedy", "samples": 1}, args.requests),
                ("PS@10", {"strategy": "priority", "samples": 10}, args.ps_requests),
            ):
                for backend, result in latency_side_by_side(services, latency_set[:count], **options).items():
                    rows.append((backend, label, 1, result))
                    print(f"{backend} {label} x1: {result}", flush=True)
                for service in services:
                    result = throughput(service, throughput_set[:count], args.concurrency, **options)
                    rows.append((service.label, label, args.concurrency, result))
                    print(f"{service.label} {label} x{args.concurrency}: {result}", flush=True)
            cached = {s.label: cache_hit_latency(s, first) for s in services}
            print(f"cache hit p50 ms: {cached}", flush=True)
            trips = {s.label: round_trips(s) for s in services}
            print(f"bare round trips p50 ms: {trips}", flush=True)
        finally:
            for service in services:
                service.stop()
    load = (load_before, os.getloadavg()[0])
    write_report(args, model_dir, model_kind, services, rows, cached, trips, load)
    return 0


def write_report(args, model_dir, model_kind, services, rows, cached, trips, load) -> None:
    command = "python benchmarks/serve_bench.py " + " ".join(sys.argv[1:])
    shown_dir = model_dir.relative_to(REPO) if model_dir.is_relative_to(REPO) else model_dir
    metadata = services[0].metadata
    lines = [
        "## Service end to end: both engine backends side by side",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}. Load average {load[0]:.1f} before and {load[1]:.1f} after the run; the"
        " machine was shared with other engineers' jobs, so compare the backends with each other (same run,"
        " requests alternating), not with other runs.",
        f"- Command: `{command.strip()}`",
        f"- Model: {metadata.name} {metadata.version} ({model_kind}, `{shown_dir}`), on {metadata.platform}.",
        "- Each backend runs as `make serve` runs it (`optserve serve --config FILE`: local Ray, Ray Serve,"
        " default settings but the backend and the ports); all services up together.",
        "- Requests: Optimize over gRPC on loopback, instruction-count objective, each a fresh compile"
        f" (`bypass_cache`) of a different -O0 function of at most {MAX_FUNCTION_BYTES} B normalized IR"
        " (tests/data/c, tests/data/serve, then seeded synthetic functions); -Oz is always compiled as well.",
        "- overhead = wall time minus the model and compile time the answer reports (gRPC, Ray Serve"
        " routing, queueing, request validation); outside = wall minus the ingress's own total (gRPC, Serve's"
        " proxy and its hop to the ingress), in = the ingress's total minus model and compile time; model and"
        " compile columns are server-side p50s.",
        "",
        "| backend | strategy | clients | requests | p50 | p99 | mean | throughput | model p50 | compile p50"
        " | overhead p50 (outside / in the ingress) | candidates/answer | beat -Oz |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, label, concurrency, r in sorted(rows, key=lambda row: (row[1] != "greedy", row[2], row[0])):
        rps = f"{r['throughput_rps']:.2f} req/s" if "throughput_rps" in r else "-"
        lines.append(
            f"| {backend} | {label} | {concurrency} | {r['requests']} | {r['p50_ms']:.0f} ms"
            f" | {r['p99_ms']:.0f} ms | {r['mean_ms']:.0f} ms | {rps} | {r['sample_p50_ms']:.0f} ms"
            f" | {r['compile_p50_ms']:.0f} ms | {r['overhead_p50_ms']:.0f} ms"
            f" ({r['outside_ingress_p50_ms']:.0f} / {r['in_ingress_p50_ms']:.0f} ms) | {r['candidates']:.1f}"
            f" | {r['beat_oz']} |"
        )
    lines += [
        "",
        "| backend | process start to model ready | then first answer | result-cache hit p50 | bare trip p50:"
        " to Serve's proxy / on to the ingress |",
        "|---|---|---|---|---|",
    ]
    for service in services:
        lines.append(
            f"| {service.label} | {service.cold['ready_s']:.1f} s | {service.cold['first_answer_s']:.2f} s"
            f" | {cached[service.label]:.1f} ms | {trips[service.label]['proxy_ms']:.1f} /"
            f" {trips[service.label]['ingress_ms']:.1f} ms |"
        )
    lines.append("")
    replace_section(args.output, "\n".join(lines))
    print(f"wrote {args.output}")


def replace_section(path: Path, section: str) -> None:
    """Write `section` into the markdown file, replacing an earlier section with the same heading."""
    heading = section.splitlines()[0]
    kept = []
    if path.exists():
        for part in ("\n" + path.read_text()).split("\n## ")[1:]:
            if not ("## " + part).startswith(heading):
                kept.append("## " + part.strip("\n") + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*kept, section]))


if __name__ == "__main__":
    sys.exit(main())
