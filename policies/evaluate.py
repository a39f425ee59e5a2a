"""Evaluate the LoopTune policy against the search baselines and numpy on the test split.

Work items run in worker processes, each pinned to its own core (no Ray: this also runs on the lent machine):
- policy: on every benchmark of the split (or `policy_shapes` of them): inference time of the 10 greedy steps
  (no measuring), then GFLOPS of the base schedule, the policy's final schedule, and the polish (fastest
  schedule the rollout visited);
- numpy: `np.matmul(a, b, out=c)` single-thread GFLOPS on the same benchmarks;
- each search at `search_time_s` on a fixed-seed sample of `search_shapes` benchmarks.
GFLOPS are best of 10 timed runs after 20 warm-up calls (kernels/measure.py). `report` renders the markdown
table and the plot from the JSON results.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

SEARCH_METHODS = ("greedy1", "greedy2", "beam2dfs", "beam4dfs", "beam2bfs", "beam4bfs", "random")
LONG_SEARCHES = ("beam4dfs", "beam4bfs", "random")  # these use their whole time limit: start them first
SAMPLE_SEED = 1  # the kernels benchmark's sample seed: the 20-shape sample is a prefix of its 24
PARTS = ("searches", "policy", "numpy")  # run separately (e.g. searches while the policy trains), then merge


@dataclass(frozen=True)
class EvalConfig:
    split: str = "test"
    search_shapes: int = 20
    search_time_s: float = 60.0
    methods: tuple[str, ...] = SEARCH_METHODS
    policy_shapes: int | None = None  # None: every benchmark of the split
    policy_path: str | None = None
    parts: tuple[str, ...] = PARTS
    jobs: int = 1
    first_core: int = 0


def split_benchmarks(split: str) -> list:
    from optserve.policies.dataset import train_test_split

    train, test = train_test_split()
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; choose train or test")
    return sorted(train if split == "train" else test, key=lambda b: (b.m, b.k, b.n))


def search_sample(split: str, count: int) -> list:
    benchmarks = split_benchmarks(split)
    if split == "test":  # same order as benchmarks/kernels_bench.py
        from optserve.policies.dataset import train_test_split

        benchmarks = train_test_split()[1]
    picked = random.Random(SAMPLE_SEED).sample(benchmarks, min(count, len(benchmarks)))
    return sorted(picked, key=lambda b: (b.m, b.k, b.n))


def run_item(item: tuple[str, str, float, str | None]) -> dict:
    """One (benchmark, method) measurement; runs in a pinned worker."""
    name, method, time_limit, policy_path = item
    from optserve.kernels.measure import numpy_gflops
    from optserve.kernels.schedule import Schedule
    from optserve.policies.dataset import Benchmark
    from optserve.policies.env import AgentState, Evaluator
    from optserve.policies.schedule import measure_schedule
    from optserve.policies.search import run_search

    m, k, n = (int(x) for x in name.removeprefix("mm").split("_"))
    row: dict = {"shape": name, "method": method, "core": sorted(os.sched_getaffinity(0))[0]}
    if method == "numpy":
        return {**row, "gflops": numpy_gflops(m, k, n)}
    spec = Benchmark(name, m, k, n).spec()
    evaluator = Evaluator(spec, measure_schedule)
    if method == "policy":
        import torch

        from optserve.policies.policy import default_policy_path, load_bundle, polish, rollout

        torch.set_num_threads(1)
        bundle = load_bundle(str(policy_path or default_policy_path()))
        rollout(bundle.network, spec)  # warm-up: first torch call in this process
        start = time.perf_counter()
        visited = rollout(bundle.network, spec)
        inference_s = time.perf_counter() - start
        base = evaluator.gflops(Schedule.base(spec))
        final = evaluator.gflops(visited.final.schedule)
        start = time.perf_counter()
        step, best = polish(evaluator, visited)
        return {
            **row,
            "gflops": final,
            "polish_gflops": best,
            "base_gflops": base,
            "inference_ms": inference_s * 1e3,
            "polish_s": time.perf_counter() - start,
            "polish_step": step,
            "predicted_gflops": bundle.predicted_gflops(spec, visited.final.schedule),
            "actions": visited.actions,
            "schedule": visited.final.schedule.text(),
            "distinct_schedules": len({s.schedule.compute_key() for s in visited.states}),
        }
    start = time.perf_counter()
    outcome = run_search(method, evaluator, time_limit)
    seconds = time.perf_counter() - start
    root = AgentState(Schedule.base(spec))
    return {
        **row,
        "gflops": outcome.gflops,
        "base_gflops": evaluator.gflops(root.schedule),
        "seconds": seconds,
        "evaluations": evaluator.evaluations,
        "actions": list(outcome.actions),
        "timed_out": outcome.timed_out,
    }


def _pin(queue) -> None:
    core = queue.get()
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def evaluate(cfg: EvalConfig, progress: Callable[[int, int, dict], None] | None = None) -> dict:
    """Run every work item on `cfg.jobs` pinned workers; the raw results and what describes the run."""
    import multiprocessing as mp

    from optserve.kernels.jit import host_description
    from optserve.kernels.measure import peak_gflops

    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # inherited by the spawned workers before numpy loads
    unknown = [m for m in cfg.methods if m not in SEARCH_METHODS]
    if unknown:
        raise ValueError(f"unknown searches {unknown}; choose from {', '.join(SEARCH_METHODS)}")
    benchmarks = split_benchmarks(cfg.split)
    if cfg.policy_shapes is not None:
        benchmarks = search_sample(cfg.split, cfg.policy_shapes)
    unknown = [p for p in cfg.parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    sample = search_sample(cfg.split, cfg.search_shapes)
    methods = cfg.methods if "searches" in cfg.parts else ()
    searches = [(b.name, m, cfg.search_time_s, None) for m in methods for b in sample]
    searches.sort(key=lambda item: item[1] not in LONG_SEARCHES)
    names = sorted({b.name for b in benchmarks} | {b.name for b in sample})
    items = searches
    if "policy" in cfg.parts:
        items += [(name, "policy", 0.0, cfg.policy_path) for name in names]
    if "numpy" in cfg.parts:
        items += [(name, "numpy", 0.0, None) for name in names]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    for j in range(cfg.jobs):
        queue.put(cores[(cfg.first_core + j) % len(cores)])
    results = []
    start = time.time()
    with ctx.Pool(cfg.jobs, initializer=_pin, initargs=(queue,)) as pool:
        for result in pool.imap_unordered(run_item, items, chunksize=1):
            results.append(result)
            if progress:
                progress(len(results), len(items), result)
    return {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpu": cpu_model(),
            "host_target": host_description(),
            "peak_gflops": peak_gflops(),
            "workers": cfg.jobs,
            "seconds": time.time() - start,
            "config": {**cfg.__dict__, "methods": list(cfg.methods), "parts": list(cfg.parts)},
            "search_sample": [b.name for b in sample],
        },
        "results": results,
    }


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def geomean(values: list[float]) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(results: list[dict], shapes: list[str], searches: bool = True) -> list[dict]:
    """Per method on `shapes`: mean and geomean GFLOPS, mean speedup over base, geomean ratio to numpy."""
    by = {(r["shape"], r["method"]): r for r in results}
    numpy = {s: by[(s, "numpy")]["gflops"] for s in shapes if (s, "numpy") in by}
    policy = {s: by[(s, "policy")] for s in shapes if (s, "policy") in by}
    columns: dict[str, dict[str, float]] = {
        "numpy (1 thread)": numpy,
        "base schedule": _base_gflops(by, shapes),
    }
    methods = [m for m in SEARCH_METHODS if searches and any((s, m) in by for s in shapes)]
    for method in methods:
        columns[f"{method}"] = {s: by[(s, method)]["gflops"] for s in shapes if (s, method) in by}
    columns["policy (10 steps)"] = {s: r["gflops"] for s, r in policy.items()}
    columns["policy + polish"] = {s: r["polish_gflops"] for s, r in policy.items()}
    base = columns["base schedule"]
    rows = []
    for name, values in columns.items():
        if not values:
            continue
        g = list(values.values())
        rows.append(
            {
                "method": name,
                "shapes": len(g),
                "mean": sum(g) / len(g),
                "geomean": geomean(g),
                "mean_speedup_over_base": sum(values[s] / base[s] for s in values if base.get(s)) / len(g),
                "geomean_vs_numpy": geomean([values[s] / numpy[s] for s in values if s in numpy]),
                "seconds": _mean([by[(s, name)].get("seconds") for s in values if (s, name) in by]),
            }
        )
    return rows


def _base_gflops(by: dict, shapes: list[str]) -> dict[str, float]:
    """Base schedule GFLOPS per shape: as measured in the policy run, else in a search run."""
    base = {}
    for (shape, _method), r in by.items():
        if shape in shapes and r.get("base_gflops") and (shape not in base or _method == "policy"):
            base[shape] = r["base_gflops"]
    return base


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def report(data: dict, command: str, plot_path: str | None = None) -> str:
    """Markdown: summary on all policy benchmarks, summary on the search sample, per-shape table."""
    results, meta = data["results"], data["meta"]
    cfg = meta["config"]
    policy_rows = [r for r in results if r["method"] == "policy"]
    all_shapes = sorted({r["shape"] for r in policy_rows}, key=_shape_key)
    sample = meta["search_sample"]
    inference = sorted(r["inference_ms"] for r in policy_rows) or [float("nan")]
    polish_s = _mean([r["polish_s"] for r in policy_rows]) or 0.0
    lines = [
        "## LoopTune policy vs searches and numpy",
        "",
        f"- Date: {meta['date']}",
        f"- Machine: {meta['cpu']} ({meta['host_target']}); {meta['workers']} worker processes, each pinned"
        f" to its own core; empirical peak {meta['peak_gflops']:.1f} GFLOPS per core",
        f"- Command: `{command}`",
        f"- Policy: {len(all_shapes)} benchmarks of the {cfg['split']} split; searches: {len(sample)} of them"
        f" (fixed-seed sample), {cfg['search_time_s']:g} s per search, every search from the base schedule.",
        "- GFLOPS: best of 10 timed runs after 20 warm-up calls; numpy: `np.matmul(a, b, out=c)`,"
        " OPENBLAS_NUM_THREADS=1. Policy = 10 greedy steps, no measuring; policy + polish = fastest of the"
        " (at most 11) schedules the rollout visited, measured.",
        f"- Policy inference (10 steps, CPU, one core): median {inference[len(inference) // 2]:.1f} ms,"
        f" max {inference[-1]:.1f} ms; polish adds {polish_s:.2f} s mean.",
        "",
        *acceptance(results, all_shapes, sample, inference[-1]),
        "",
        f"### All {len(all_shapes)} {cfg['split']} benchmarks",
        "",
        *_summary_table(summary(results, all_shapes, searches=False)),
        "",
        f"### Search sample ({len(sample)} benchmarks, searches at {cfg['search_time_s']:g} s)",
        "",
        *_summary_table(summary(results, sample)),
        "",
        "### Per benchmark of the search sample (GFLOPS)",
        "",
    ]
    by = {(r["shape"], r["method"]): r for r in results}
    base = _base_gflops(by, sample)
    methods = [m for m in SEARCH_METHODS if any((s, m) in by for s in sample)]
    lines.append(
        "| shape | numpy | base | " + " | ".join(methods) + " | policy | policy + polish | actions |"
    )
    lines.append("|---|---|---|" + "---|" * len(methods) + "---|---|---|")
    for s in sample:
        p = by.get((s, "policy"), {})
        cells = [f"{by[(s, m)]['gflops']:.1f}" if (s, m) in by else "-" for m in methods]
        lines.append(
            f"| {s} | {by.get((s, 'numpy'), {}).get('gflops', math.nan):.1f} | {base.get(s, math.nan):.1f} | "
            + " | ".join(cells)
            + f" | {p.get('gflops', float('nan')):.1f} | {p.get('polish_gflops', float('nan')):.1f}"
            f" | `{' '.join(p.get('actions', []))}` |"
        )
    if plot_path:
        lines += ["", f"![LoopTune evaluation]({os.path.basename(plot_path)})"]
    return "\n".join(lines) + "\n"


def acceptance(results: list[dict], all_shapes: list[str], sample: list[str], max_ms: float) -> list[str]:
    """The issue's acceptance checks, computed from the results (policy = policy + polish)."""
    overall = {r["method"]: r for r in summary(results, all_shapes, searches=False)}
    on_sample = {r["method"]: r for r in summary(results, sample)}
    policy = overall.get("policy + polish")
    if policy is None:
        return []
    searches = {m: r for m, r in on_sample.items() if m in SEARCH_METHODS}
    best = max(searches.values(), key=lambda r: r["geomean"]) if searches else None
    sample_policy = on_sample["policy + polish"]
    lines = [
        "### Acceptance (policy + polish)",
        "",
        f"- Mean speedup over the base schedule, {len(all_shapes)} benchmarks:"
        f" {policy['mean_speedup_over_base']:.2f}x (goal >= 3x; 10 steps without polish:"
        f" {overall['policy (10 steps)']['mean_speedup_over_base']:.2f}x)"
        f" {'MET' if policy['mean_speedup_over_base'] >= 3 else 'NOT MET'}",
        f"- Geomean ratio to numpy single-thread: {policy['geomean_vs_numpy']:.2f}x (goal >= 0.9x)"
        f" {'MET' if policy['geomean_vs_numpy'] >= 0.9 else 'NOT MET'}",
        f"- Policy inference: max {max_ms:.1f} ms per 10-step rollout (goal < 50 ms)"
        f" {'MET' if max_ms < 50 else 'NOT MET'}",
    ]
    if best is not None:
        lines.append(
            f"- Against the best search on the {len(sample)}-benchmark sample ({best['method']}, geomean"
            f" {best['geomean']:.1f} GFLOPS): policy + polish {sample_policy['geomean']:.1f}"
            f" {'MET' if sample_policy['geomean'] >= best['geomean'] else 'NOT MET'}"
        )
    return lines


def _summary_table(rows: list[dict]) -> list[str]:
    out = [
        "| method | benchmarks | mean GFLOPS | geomean GFLOPS | mean speedup over base | geomean vs numpy"
        " | mean search s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        secs = "" if r["seconds"] is None else f"{r['seconds']:.1f}"
        out.append(
            f"| {r['method']} | {r['shapes']} | {r['mean']:.1f} | {r['geomean']:.1f} |"
            f" {r['mean_speedup_over_base']:.2f} | {r['geomean_vs_numpy']:.2f} | {secs} |"
        )
    return out


def _shape_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in name.removeprefix("mm").split("_"))


def plot(data: dict, path: str) -> None:
    """Left: geomean GFLOPS per method on the search sample. Right: policy+polish vs numpy per benchmark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, meta = data["results"], data["meta"]
    rows = summary(results, meta["search_sample"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    left.barh([r["method"] for r in rows][::-1], [r["geomean"] for r in rows][::-1], color="tab:blue")
    left.set_xlabel("geomean GFLOPS")
    left.set_title(
        f"{len(meta['search_sample'])} test benchmarks, searches at {meta['config']['search_time_s']:g} s"
    )
    by = {(r["shape"], r["method"]): r for r in results}
    shapes = [r["shape"] for r in results if r["method"] == "policy" and (r["shape"], "numpy") in by]
    numpy = [by[(s, "numpy")]["gflops"] for s in shapes]
    right.scatter(numpy, [by[(s, "policy")]["polish_gflops"] for s in shapes], s=8, label="policy + polish")
    right.scatter(numpy, [by[(s, "policy")]["base_gflops"] for s in shapes], s=8, alpha=0.5, label="base")
    top = max(numpy + [by[(s, "policy")]["polish_gflops"] for s in shapes]) * 1.05
    right.plot([0, top], [0, top], "k--", lw=0.8, label="= numpy")
    right.set_xlabel("numpy 1-thread GFLOPS")
    right.set_ylabel("GFLOPS")
    right.set_title(f"all {len(shapes)} test benchmarks ({meta['host_target']})")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def merge(parts: list[dict]) -> dict:
    """One result set from runs of different parts (the first run's meta, every run's results)."""
    meta = dict(parts[0]["meta"])
    meta["runs"] = [p["meta"] for p in parts]
    return {"meta": meta, "results": [r for p in parts for r in p["results"]]}
