"""Benchmark the service end to end: cold start, then latency and throughput of Optimize over gRPC.

    python benchmarks/serve_bench.py [--model-dir DIR] [--backend torch|vllm] [--requests 40]

Starts the real service (local Ray, Ray Serve, the model, compiler workers) on ports 18400/19400, and
measures:
- cold start: ray.init, Serve's proxies, and the application until every deployment is up; then the first
  Optimize answer;
- latency (p50/p99, one client) and throughput (`--concurrency` clients) of greedy and priority sampling with
  10 samples (PS@10), each request a fresh compile (bypass_cache) of a function from tests/data/serve and
  the engine's synthetic -O0 functions; and the latency of a result-cache hit.

Without --model-dir it uses models/passformer, or builds the untrained tiny stand-in model under
data/serve_bench/ when that is missing (its pass lists are valid but uninformed; it has the bundled
model's format, so its timings are indicative of the serving path, not of a trained model's size).
Writes a markdown section to docs/bench/serve.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "serve"
OUT = REPO / "docs" / "bench" / "serve.md"
HTTP_PORT, GRPC_PORT = 18400, 19400


def model_directory(requested: str | None) -> tuple[Path, str]:
    if requested:
        return Path(requested), "given"
    bundled = REPO / "models" / "passformer"
    if (bundled / "profile.json").is_file():
        return bundled, "bundled"
    tiny = REPO / "data" / "serve_bench" / "tiny-model"
    if not (tiny / "profile.json").is_file():
        print(f"building the tiny stand-in model in {tiny}", flush=True)
        subprocess.run([sys.executable, "-m", "optserve.engine.tiny_model", str(tiny)], check=True)
    return tiny, "tiny untrained stand-in"


def workload(count: int) -> list[str]:
    """Small -O0 functions: the test IR files and seeded synthetic ones (the shape compilers send)."""
    from optserve.engine.tiny_model import synthetic_function

    modules = [path.read_text() for path in sorted(DATA.glob("*.ll"))]
    rng = random.Random(0)
    while len(modules) < count:
        modules.append(synthetic_function(rng, "f"))
    return modules[:count]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def measure(client, modules: list[str], concurrency: int, **options) -> dict:
    """Latency of each request (fresh compile) and throughput with `concurrency` callers."""
    from tqdm import tqdm

    def one(module: str) -> tuple[float, object]:
        started = time.perf_counter()
        response = client.optimize(module, bypass_cache=True, **options)
        return time.perf_counter() - started, response

    label = f"{options.get('strategy', 'greedy')}@{options.get('samples', 1)} x{concurrency}"
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(tqdm(pool.map(one, modules), total=len(modules), desc=label, leave=False))
    wall = time.perf_counter() - started
    latencies = [seconds for seconds, _ in results]
    responses = [response for _, response in results]
    return {
        "requests": len(modules),
        "p50_ms": 1e3 * percentile(latencies, 50),
        "p99_ms": 1e3 * percentile(latencies, 99),
        "mean_ms": 1e3 * statistics.fmean(latencies),
        "throughput_rps": len(modules) / wall,
        "candidates": statistics.fmean(len(r.candidates) for r in responses),
        "beat_oz": sum(r.best.cost < r.oz_cost for r in responses),
        "sample_ms": 1e3 * statistics.fmean(r.timings.sample_s for r in responses),
        "compile_ms": 1e3 * statistics.fmean(r.timings.compile_s for r in responses),
    }


def cache_hit_latency(client, module: str, repeats: int = 50) -> dict:
    client.optimize(module)
    latencies = []
    for _ in range(repeats):
        started = time.perf_counter()
        assert client.optimize(module).cached
        latencies.append(time.perf_counter() - started)
    return {"p50_ms": 1e3 * percentile(latencies, 50), "p99_ms": 1e3 * percentile(latencies, 99)}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0))
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cores} CPU cores ({cpu}), {memory_gib:.0f} GiB RAM, no GPU, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir")
    parser.add_argument("--backend", choices=["torch", "vllm"], default="torch")
    parser.add_argument("--requests", type=int, default=40, help="requests per greedy measurement")
    parser.add_argument("--ps-requests", type=int, default=20, help="requests per PS@10 measurement")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()

    model_dir, model_kind = model_directory(args.model_dir)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    import ray

    from optserve.config import Settings
    from optserve.serve import server
    from optserve.serve.client import OptserveClient

    imported = time.perf_counter()
    settings = Settings.model_validate(
        {
            "engine": {"model_dir": str(model_dir), "backend": args.backend},
            "serve": {"http_port": HTTP_PORT, "grpc_port": GRPC_PORT, "max_queued_requests": 256},
        }
    )
    ray.init(include_dashboard=False, log_to_driver=False)
    ray_up = time.perf_counter()
    endpoints = server.start(settings)
    app_up = time.perf_counter()
    modules = workload(max(args.requests, args.ps_requests))
    try:
        with OptserveClient(endpoints.grpc_target, timeout_s=600) as client:
            metadata = client.model_metadata()
            client.optimize(modules[0])
            first_answer = time.perf_counter()
            cold = {
                "imports_s": imported - started,
                "ray_init_s": ray_up - imported,
                "serve_start_and_deploy_s": app_up - ray_up,
                "first_answer_s": first_answer - app_up,
                "total_s": first_answer - started,
            }
            print(f"cold start: {cold}", flush=True)
            rows = []
            for strategy, samples, count in (
                ("greedy", 1, args.requests),
                ("priority", 10, args.ps_requests),
            ):
                for concurrency in (1, args.concurrency):
                    result = measure(client, modules[:count], concurrency, strategy=strategy, samples=samples)
                    label = "greedy" if strategy == "greedy" else f"PS@{samples}"
                    rows.append((label, concurrency, result))
                    print(f"{label} concurrency {concurrency}: {result}", flush=True)
            cached = cache_hit_latency(client, modules[0])
            print(f"cache hit: {cached}", flush=True)
    finally:
        server.stop()
    load = (load_before, os.getloadavg()[0])
    write_report(args, model_dir, model_kind, metadata, cold, rows, cached, load)
    return 0


def write_report(args, model_dir, model_kind, metadata, cold, rows, cached, load) -> None:
    command = "python benchmarks/serve_bench.py " + " ".join(sys.argv[1:])
    shown_dir = model_dir.relative_to(REPO) if model_dir.is_relative_to(REPO) else model_dir
    stand_in_note = (
        " The trained model of issue 7 is not bundled yet: these numbers measure the serving path with the"
        " untrained stand-in (same format, tiny network), not a trained model's speed or quality."
        if model_kind.startswith("tiny")
        else ""
    )
    lines = [
        f"## Service (issue 3): cold start, latency and throughput, {metadata.backend} backend",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}. Load average {load[0]:.1f} before and {load[1]:.1f} after the run"
        " (other jobs share the machine; on 2 cores anything above ~2 means the timings are inflated).",
        f"- Command: `{command.strip()}`",
        f"- Model: {metadata.name} {metadata.version} ({model_kind}, `{shown_dir}`),"
        f" {metadata.backend} backend on {metadata.platform}.{stand_in_note}",
        "- Requests: Optimize over gRPC on loopback, instruction-count objective, each a fresh compile"
        " (`bypass_cache`) of a small -O0 function (tests/data/serve and seeded synthetic functions);"
        " -Oz is always compiled as well.",
        "",
        "Cold start (`ray.init` to the first Optimize answer, in one process):",
        "",
        "| imports | ray.init | Serve start + deploy | first answer | total |",
        "|---|---|---|---|---|",
        "| {imports_s:.1f} s | {ray_init_s:.1f} s | {serve_start_and_deploy_s:.1f} s | {first_answer_s:.2f} s"
        " | {total_s:.1f} s |".format(**cold),
        "",
        "| strategy | clients | requests | p50 | p99 | mean | throughput | candidates/answer | beat -Oz |"
        " model time | compile time |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, concurrency, r in rows:
        lines.append(
            f"| {label} | {concurrency} | {r['requests']} | {r['p50_ms']:.0f} ms | {r['p99_ms']:.0f} ms "
            f"| {r['mean_ms']:.0f} ms | {r['throughput_rps']:.2f} req/s | {r['candidates']:.1f} "
            f"| {r['beat_oz']} | {r['sample_ms']:.0f} ms | {r['compile_ms']:.0f} ms |"
        )
    lines += [
        "",
        f"Result-cache hit (same request again): p50 {cached['p50_ms']:.1f} ms,"
        f" p99 {cached['p99_ms']:.1f} ms.",
        "",
        "Model and compile time are means of the server-side timings in each answer; the rest of the latency"
        " is gRPC, Ray Serve routing and queueing.",
        "",
    ]
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
