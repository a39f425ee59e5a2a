"""Evaluate the LoopTune policy against the search baselines and numpy on the test split.

Work items run in worker processes, each pinned to its own core (no Ray: this also runs on the lent machine):
- policy: on every benchmark of the split (or `policy_shapes` of them): inference time of the 10 greedy steps
  (no measuring), then the base schedule, every schedule the rollout visited and numpy's matmul, timed in
  `rounds` interleaved rounds (kernels on shared hosts drift in speed over seconds; timing what is compared
  alternately keeps the drift out of the ratios): the policy's final schedule, the polish (fastest visited
  schedule), base and numpy GFLOPS all come from those rounds;
- searches: each at `search_time_s` on a fixed-seed sample of `search_shapes` benchmarks (ranked by their
  own measurements, as a search does); then one `compare` item per sample benchmark times the base schedule,
  every search's result, the policy's visited schedules and numpy in interleaved rounds the same way.
A timing is best of 10 timed runs after 20 warm-up calls (kernels/measure.py); interleaved GFLOPS are the best
over the rounds. `report` renders the markdown table and the plot from the JSON results.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from optserve.policies.methods import BASELINE_SEARCHES as SEARCH_METHODS
from optserve.policies.methods import SearchMethod

# These use their whole time limit: start them first.
LONG_SEARCHES = (SearchMethod.BEAM4DFS, SearchMethod.BEAM4BFS, SearchMethod.RANDOM)
SAMPLE_SEED = 1  # the kernels benchmark's sample seed: the 20-shape sample is a prefix of its 24
PARTS = ("searches", "policy")  # run separately (e.g. searches while the policy trains), then merge


@dataclass(frozen=True)
class EvalConfig:
    split: str = "test"
    search_shapes: int = 20
    search_time_s: float = 60.0
    methods: tuple[str, ...] = SEARCH_METHODS
    policy_shapes: int | None = None  # None: every benchmark of the split
    policy_path: str | None = None
    parts: tuple[str, ...] = PARTS
    rounds: int = 5  # interleaved timing rounds for what is compared
    jobs: int = 1
    first_core: int = 0


def split_benchmarks(split: str) -> list:
    from optserve.looptune_training.dataset import train_test_split

    train, test = train_test_split()
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; choose train or test")
    return sorted(train if split == "train" else test, key=lambda b: (b.m, b.k, b.n))


def search_sample(split: str, count: int) -> list:
    benchmarks = split_benchmarks(split)
    if split == "test":  # same order as benchmarks/kernels_bench.py
        from optserve.looptune_training.dataset import train_test_split

        benchmarks = train_test_split()[1]
    picked = random.Random(SAMPLE_SEED).sample(benchmarks, min(count, len(benchmarks)))
    return sorted(picked, key=lambda b: (b.m, b.k, b.n))


def run_item(item: dict) -> dict:
    """One work item ({"shape", "method", ...}); runs in a pinned worker."""
    import torch

    from optserve.kernels.schedule import Schedule
    from optserve.looptune_training.templates import play
    from optserve.looptune_training.train import benchmark
    from optserve.policies.env import AgentState, Evaluator
    from optserve.policies.policy import default_policy_path, load_bundle, rollout
    from optserve.policies.scheduler import measure_interleaved, measure_schedule
    from optserve.policies.search import run_search

    name, method = item["shape"], item["method"]
    bench = benchmark(name)
    spec = bench.spec()
    sizes = (bench.m, bench.k, bench.n)
    row: dict = {"shape": name, "method": method, "core": sorted(os.sched_getaffinity(0))[0]}
    if method in ("policy", "compare"):
        torch.set_num_threads(1)
        bundle = load_bundle(str(item.get("policy") or default_policy_path()))
        rollout(bundle.network, spec)  # warm-up: first torch call in this process
        start = time.perf_counter()
        visited = rollout(bundle.network, spec)
        inference_s = time.perf_counter() - start
        schedules = [s.schedule for s in visited.states]
    if method == "policy":
        start = time.perf_counter()
        gflops, numpy = measure_interleaved(spec, schedules, item["rounds"], numpy_sizes=sizes)
        step = max(range(len(gflops)), key=lambda i: (gflops[i], -i))
        return {
            **row,
            "gflops": gflops[-1],
            "polish_gflops": gflops[step],
            "base_gflops": gflops[0],
            "numpy_gflops": numpy,
            "inference_ms": inference_s * 1e3,
            "polish_s": (time.perf_counter() - start) / item["rounds"],
            "polish_step": step,
            "predicted_gflops": bundle.predicted_gflops(spec, visited.final.schedule),
            "actions": visited.actions,
            "schedule": visited.final.schedule.text(),
            "distinct_schedules": len({s.compute_key() for s in schedules}),
        }
    if method == "compare":
        found = {m: play(spec, actions)[-1].schedule for m, actions in item["searches"].items()}
        gflops, numpy = measure_interleaved(
            spec, [*schedules, *found.values()], item["rounds"], numpy_sizes=sizes
        )
        visited_gflops = gflops[: len(schedules)]
        return {
            **row,
            "gflops": {
                "base": visited_gflops[0],
                "numpy": numpy,
                "policy": visited_gflops[-1],
                "polish": max(visited_gflops),
                **dict(zip(found, gflops[len(schedules) :], strict=True)),
            },
        }
    evaluator = Evaluator(spec, measure_schedule)
    start = time.perf_counter()
    outcome = run_search(method, evaluator, item["time_s"])
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


def pinned_pool(jobs: int, first_core: int = 0):
    """A spawn pool of `jobs` workers, each pinned to its own core (first_core, first_core + 1, ...)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    for j in range(jobs):
        queue.put(cores[(first_core + j) % len(cores)])
    return ctx.Pool(jobs, initializer=_pin, initargs=(queue,))


def evaluate(cfg: EvalConfig, progress: Callable[[int, int, dict], None] | None = None) -> dict:
    """Run every work item on `cfg.jobs` pinned workers; the raw results and what describes the run."""

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
    items = [{"shape": b.name, "method": m, "time_s": cfg.search_time_s} for m in methods for b in sample]
    items.sort(key=lambda item: item["method"] not in LONG_SEARCHES)
    if "policy" in cfg.parts:
        items += [
            {"shape": b.name, "method": "policy", "policy": cfg.policy_path, "rounds": cfg.rounds}
            for b in benchmarks
        ]
    results: list[dict] = []
    start = time.time()
    with pinned_pool(cfg.jobs, cfg.first_core) as pool:
        for result in pool.imap_unordered(run_item, items, chunksize=1):
            results.append(result)
            if progress:
                progress(len(results), len(items), result)
        found: dict[str, dict[str, list[str]]] = {}
        for r in results:
            if r["method"] in SEARCH_METHODS:
                found.setdefault(r["shape"], {})[r["method"]] = r["actions"]
        compare = [
            {"shape": s, "method": "compare", "searches": f, "policy": cfg.policy_path, "rounds": cfg.rounds}
            for s, f in sorted(found.items())
        ]
        for result in pool.imap_unordered(run_item, compare, chunksize=1):
            results.append(result)
            if progress:
                progress(len(results), len(items) + len(compare), result)
    return {
        "meta": {
            **run_meta(cfg.jobs, start),
            "config": {**cfg.__dict__, "methods": list(cfg.methods), "parts": list(cfg.parts)},
            "search_sample": [b.name for b in sample],
        },
        "results": results,
    }


def run_meta(workers: int, start: float) -> dict:
    """Where and when a measuring run ran: date, CPU, LLVM target, empirical peak, workers, wall seconds."""
    from optserve.kernels.jit import host_description
    from optserve.kernels.measure import peak_gflops

    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_model(),
        "host_target": host_description(),
        "peak_gflops": peak_gflops(),
        "workers": workers,
        "seconds": time.time() - start,
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


def method_gflops(
    results: list[dict], shapes: list[str], searches: bool = True
) -> dict[str, dict[str, float]]:
    """GFLOPS per method and shape. On the search sample (`searches`): the interleaved re-measurement of every
    method's result; otherwise the policy items' own interleaved timings."""
    by = {(r["shape"], r["method"]): r for r in results}
    if searches:
        compared = {s: by[(s, "compare")]["gflops"] for s in shapes if (s, "compare") in by}
        keys = [("numpy (1 thread)", "numpy"), ("base schedule", "base"), *((m, m) for m in SEARCH_METHODS)]
        keys += [("policy (10 steps)", "policy"), ("policy + polish", "polish")]
        return {label: {s: c[key] for s, c in compared.items() if key in c} for label, key in keys}
    policy = {s: by[(s, "policy")] for s in shapes if (s, "policy") in by}
    fields = [
        ("numpy (1 thread)", "numpy_gflops"),
        ("base schedule", "base_gflops"),
        ("policy (10 steps)", "gflops"),
        ("policy + polish", "polish_gflops"),
    ]
    return {label: {s: r[field] for s, r in policy.items()} for label, field in fields}


def summary(results: list[dict], shapes: list[str], searches: bool = True) -> list[dict]:
    """Per method on `shapes`: mean and geomean GFLOPS, mean speedup over base, geomean ratio to numpy (for
    searches also their time and the geomean of the GFLOPS they measured for themselves while searching)."""
    by = {(r["shape"], r["method"]): r for r in results}
    columns = method_gflops(results, shapes, searches)
    base, numpy = columns["base schedule"], columns["numpy (1 thread)"]
    rows = []
    for name, values in columns.items():
        if not values:
            continue
        g = list(values.values())
        own = [by[(s, name)] for s in values if (s, name) in by]
        rows.append(
            {
                "method": name,
                "shapes": len(g),
                "mean": sum(g) / len(g),
                "geomean": geomean(g),
                "mean_speedup_over_base": sum(values[s] / base[s] for s in values if base.get(s)) / len(g),
                "geomean_vs_numpy": geomean([values[s] / numpy[s] for s in values if numpy.get(s)]),
                "seconds": _mean([r.get("seconds") for r in own]),
                "own_geomean": geomean([r["gflops"] for r in own]) if own else None,
            }
        )
    return rows


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
        "- GFLOPS: a timing is best of 10 timed runs after 20 warm-up calls; what is compared on one"
        f" benchmark (base, every result, numpy) is timed in {cfg['rounds']} interleaved rounds and keeps its"
        " best, because core speed drifts on the lent machine. numpy: `np.matmul(a, b, out=c)`,"
        " OPENBLAS_NUM_THREADS=1. Policy = 10 greedy steps, no measuring; policy + polish = fastest of the"
        " (at most 11) schedules the rollout visited, measured. Searches rank candidates by their own"
        " timings (the 'own' column), then their result is re-timed with the others.",
        f"- Policy inference (10 steps, CPU, one core): median {inference[len(inference) // 2]:.1f} ms,"
        f" max {inference[-1]:.1f} ms; polish (one round) adds {polish_s:.2f} s mean.",
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
    columns = method_gflops(results, sample)
    methods = [m for m in SEARCH_METHODS if columns[m]]
    lines.append(
        "| shape | numpy | base | " + " | ".join(methods) + " | policy | policy + polish | actions |"
    )
    lines.append("|---|---|---|" + "---|" * len(methods) + "---|---|---|")
    for s in sample:
        cells = [columns[c].get(s, math.nan) for c in ("numpy (1 thread)", "base schedule", *methods)]
        cells += [columns[c].get(s, math.nan) for c in ("policy (10 steps)", "policy + polish")]
        actions = " ".join(by.get((s, "policy"), {}).get("actions", []))
        lines.append(f"| {s} | " + " | ".join(f"{v:.1f}" for v in cells) + f" | `{actions}` |")
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
    sample_policy = on_sample.get("policy + polish")
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
    if best is not None and sample_policy is not None:
        lines.append(
            f"- Against the best search on the {len(sample)}-benchmark sample ({best['method']}, geomean"
            f" {best['geomean']:.1f} GFLOPS): policy + polish {sample_policy['geomean']:.1f}"
            f" {'MET' if sample_policy['geomean'] >= best['geomean'] else 'NOT MET'}"
        )
    return lines


def _summary_table(rows: list[dict]) -> list[str]:
    out = [
        "| method | benchmarks | mean GFLOPS | geomean GFLOPS | mean speedup over base | geomean vs numpy"
        " | mean search s | own geomean |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        secs = "" if r["seconds"] is None else f"{r['seconds']:.1f}"
        own = "" if r["own_geomean"] is None else f"{r['own_geomean']:.1f}"
        out.append(
            f"| {r['method']} | {r['shapes']} | {r['mean']:.1f} | {r['geomean']:.1f} |"
            f" {r['mean_speedup_over_base']:.2f} | {r['geomean_vs_numpy']:.2f} | {secs} | {own} |"
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
    policy_rows = [r for r in results if r["method"] == "policy"]
    numpy = [r["numpy_gflops"] for r in policy_rows]
    right.scatter(numpy, [r["polish_gflops"] for r in policy_rows], s=8, label="policy + polish")
    right.scatter(numpy, [r["base_gflops"] for r in policy_rows], s=8, alpha=0.5, label="base")
    top = max(numpy + [r["polish_gflops"] for r in policy_rows]) * 1.05
    right.plot([0, top], [0, top], "k--", lw=0.8, label="= numpy")
    right.set_xlabel("numpy 1-thread GFLOPS")
    right.set_ylabel("GFLOPS")
    right.set_title(f"all {len(policy_rows)} test benchmarks ({meta['host_target']})")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def merge(parts: list[dict]) -> dict:
    """One result set from runs of different parts (the first run's meta, every run's results)."""
    meta = dict(parts[0]["meta"])
    meta["runs"] = [p["meta"] for p in parts]
    return {"meta": meta, "results": [r for p in parts for r in p["results"]]}
