"""Write docs/bench/looptune.md: the lent-machine evaluation (tables, plot) and how the policy was trained.

    python benchmarks/looptune_report.py --eval runs/lent3/eval.json --earlier runs/lent3/eval_earlier.json \
        --train runs/looptune_v2 --holdout runs/looptune_v2_holdout \
        --templates data/looptune/templates_v2.json.gz data/looptune/templates_v2_pass2.json.gz \
        --out docs/bench/looptune.md

`--eval`/`--earlier` come from benchmarks/looptune_lent_run.sh; `--train` and `--holdout` are run folders of
`python -m optserve.looptune_training.train` (the bundled policy, and the same training with shapes held out).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np

from optserve.looptune_training.evaluate import SEARCH_METHODS, plot, report, summary

NOTES = [
    "### Notes",
    "",
    "- Timing noise on the lent machine: the speed of a core drifts by tens of percent over seconds (see the"
    " empirical peaks of the passes above, and how well the passes agree). Hence every ratio here compares"
    " schedules timed in interleaved rounds in one worker, and the policy learns from ratios between"
    " templates timed back to back on one shape.",
    "- Searches rank their candidates by single timings and keep the best one: the GFLOPS a search reports"
    " for itself ('own geomean') carry that selection bias, which is why the tables use their result"
    " re-timed with the others.",
    "- Training and evaluation ran on the same CPU model (the lent machine's Xeon, AVX-512); schedules"
    " tuned there are not tuned for the AVX2 development machine. Rollouts are deterministic: the bundled"
    " network gives the same action sequences here as there.",
    "- Ray RLlib was not used: `import ray.rllib` fails here without gymnasium (not installed), APEX-DQN"
    " is not part of RLlib 2.x's current algorithms, and the 16-core machine where rewards can be measured"
    " has no Ray. The trainer is plain torch. Its DQN phase (double DQN, n-step, replay, DQfD, cost-model"
    " rewards; `--iterations`) did not beat its own starting point when measured on training shapes,"
    " and was not run for this bundle: the bundled policy is the tree Q-learning phase alone.",
]


def headroom_section(data: dict, holdout: Path | None) -> list[str]:
    """How far above the base schedule anything got on this backend, from the same timings."""
    shapes = sorted({r["shape"] for r in data["results"] if r["method"] == "policy"})
    overall = {r["method"]: r for r in summary(data["results"], shapes, searches=False)}
    sample = {r["method"]: r for r in summary(data["results"], data["meta"]["search_sample"])}
    searches = [r for m, r in sample.items() if m in SEARCH_METHODS]
    best = max(searches, key=lambda r: r["mean_speedup_over_base"]) if searches else None
    numpy_speedup = overall["numpy (1 thread)"]["mean_speedup_over_base"]
    lines = [
        "### Headroom above the base schedule on this backend",
        "",
        f"- numpy single-thread is {numpy_speedup:.2f}x the base schedule on average ({len(shapes)} test"
        " benchmarks, same interleaved timings): the base schedule is already vectorized along n by our"
        f" backend, so 3x base would be {3 / numpy_speedup:.2f}x numpy.",
    ]
    if best:
        lines.append(
            f"- The best 60 s search on the sample ({best['method']}), re-timed:"
            f" {best['mean_speedup_over_base']:.2f}x base."
        )
    if holdout:
        score = json.loads((holdout / "tree_policy" / "policy.json").read_text())["score_held_out_shapes"]
        lines.append(
            f"- The best of the {score['shapes']} held-out training shapes' measured templates:"
            f" {score['oracle_mean_speedup_over_base']:.2f}x base on average (training data, see below)."
        )
    return lines


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def earlier_section(current: dict, earlier: dict) -> list[str]:
    """The previously bundled policy on the same split, same machine, same timing protocol."""
    shapes = sorted({r["shape"] for r in earlier["results"] if r["method"] == "policy"})
    rows = {r["method"]: r for r in summary(earlier["results"], shapes, searches=False)}
    now = {r["method"]: r for r in summary(current["results"], shapes, searches=False)}
    out = [
        "### Against the previously bundled policy, same machine and protocol",
        "",
        "| policy | mean speedup over base | geomean vs numpy | geomean GFLOPS |",
        "|---|---|---|---|",
    ]
    for label, source in (("before (DQfD on search demonstrations)", rows), ("now (tree Q-learning)", now)):
        r = source["policy + polish"]
        out.append(
            f"| {label}, + polish | {r['mean_speedup_over_base']:.2f} | {r['geomean_vs_numpy']:.2f} |"
            f" {r['geomean']:.1f} |"
        )
    return out


def template_section(paths: list[Path]) -> list[str]:
    passes = []
    for path in paths:
        with gzip.open(path, "rt") as f:
            passes.append(json.load(f))
    first = passes[0]
    templates = first["templates"]
    names = sorted({r["shape"] for r in first["shapes"]})
    base = templates.index([])
    out = [
        "### Training data: templates measured on the training shapes",
        "",
        f"- {len(first['pool'])} candidate templates (every structure with at most 2 splits and a"
        " vectorizable innermost loop, plus the structures within 5% of a shape's best in the earlier"
        " search collection `data/looptune/measured.json.gz`), timed on"
        f" {len(first['stage1']['shapes'])} training shapes;"
        f" greedy cover kept {len(templates)}.",
    ]
    for i, p in enumerate(passes, 1):
        by = {r["shape"]: r["gflops"] for r in p["shapes"]}
        grid = np.array([[g or np.nan for g in by[s]] for s in names if s in by])
        best = np.nanmax(grid, axis=1)
        out.append(
            f"- Pass {i} ({p['meta']['date']}, {p['meta']['workers']} pinned workers,"
            f" {p['meta']['seconds']:.0f} s, `{p['meta']['command'].replace('/work/main/', '')}`):"
            f" {len(grid)} shapes; base geomean {math.exp(np.nanmean(np.log(grid[:, base]))):.1f} GFLOPS,"
            f" best template geomean {math.exp(np.nanmean(np.log(best))):.1f}, mean best/base"
            f" {np.nanmean(best / grid[:, base]):.2f}x; empirical peak {p['meta']['peak_gflops']:.1f}."
        )
    rel = []
    for p in passes:
        by = {r["shape"]: r["gflops"] for r in p["shapes"]}
        logs = np.log(np.array([[g or np.nan for g in by[s]] for s in names]))
        rel.append(logs - np.nanmean(logs, axis=1, keepdims=True))
    pairs = [
        np.corrcoef(rel[i][~np.isnan(rel[i])], rel[j][~np.isnan(rel[i])])[0, 1]
        for i in range(len(rel))
        for j in range(i + 1, len(rel))
    ]
    out.append(
        "- Agreement between passes of a template's log GFLOPS relative to its shape's mean: correlation"
        f" {' to '.join(sorted({f'{min(pairs):.2f}', f'{max(pairs):.2f}'}))}. The policy learns from the mean"
        " over passes."
    )
    return out


def training_section(train: Path, holdout: Path | None, plot_path: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = json.loads((train / "tree_policy" / "policy.json").read_text())
    curve = read_csv(train / "tree_curve.csv")
    cost = read_csv(train / "cost_model.csv")
    cost_meta = json.loads((train / "bundle" / "policy.json").read_text())["cost_model"]
    held = json.loads((holdout / "tree_policy" / "policy.json").read_text()) if holdout else None
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    a.plot([r["epoch"] for r in curve], [r["loss"] for r in curve], marker="o", ms=3, label="all shapes")
    if holdout:
        held_curve = read_csv(holdout / "tree_curve.csv")
        a.plot([r["epoch"] for r in held_curve], [r["loss"] for r in held_curve], label="held-out run")
    a.set_xlabel("epoch")
    a.set_ylabel("loss (squared error + DQfD margin)")
    a.set_title("Q-learning on the measured template tree")
    a.legend()
    b.plot([r["epoch"] for r in cost], [r["train_rmse_log"] for r in cost], label="train")
    b.plot([r["epoch"] for r in cost], [r["val_rmse_log"] for r in cost], label="held-out shapes")
    b.set_xlabel("epoch")
    b.set_ylabel("RMSE of log GFLOPS")
    b.set_title("cost model (predicted GFLOPS)")
    b.legend()
    fig.tight_layout()
    fig.savefig(plot_path, dpi=110)
    cfg = meta["config"]
    lines = [
        "### Training",
        "",
        f"- {meta['algorithm']}: {meta['tree_rows']} (state, measured actions) rows from"
        f" {meta['shapes_fitted']} training shapes x {meta['templates']} templates"
        f" ({meta['template_passes']} passes); Q-network FC {meta['hidden']}, {cfg['tree_epochs']} epochs,"
        f" Adam lr {cfg['tree_lr']} (cosine), batch {cfg['tree_batch']}, margin {cfg['margin']};"
        f" {curve[-1]['seconds']:.0f} s on 1 CPU thread of the development machine.",
        "- Offline score (greedy rollout, scored by the measured template it ends on; ratios from the"
        " training data, not re-timed):",
    ]
    for label, score in (
        ("fitted shapes", meta["score_fitted_shapes"]),
        ("held-out training shapes (separate run)", held["score_held_out_shapes"] if held else None),
    ):
        if score:
            lines.append(
                f"  - {label} ({score['shapes']}): mean speedup over base"
                f" {score['mean_speedup_over_base']:.2f}x"
                f" (best template per shape: {score['oracle_mean_speedup_over_base']:.2f}x), geomean"
                f" {score['geomean_fraction_of_best_template']:.3f} of the best template's GFLOPS,"
                f" {score['off_tree']} rollouts left the measured tree."
            )
    lines += [
        f"- Cost model (MLP, log GFLOPS; the service's predicted GFLOPS): {cost_meta['samples']} measured"
        f" nests, {cost_meta['records']} records of {cost_meta['shapes']} shapes; on"
        f" {cost_meta['held_out_shapes']} held-out shapes RMSE {cost_meta['val_rmse_log']:.3f}, mean"
        f" Spearman within a record {cost_meta['val_spearman_per_shape']:.2f}, its top-ranked nest within"
        f" 10% of the measured best in {100 * cost_meta['val_top1_within_10pct']:.0f}% of the records.",
        "",
        f"![training curves]({plot_path.name})",
    ]
    return lines


REPRODUCE = [
    "### Reproduce",
    "",
    "1. Templates, lent machine (carry `.carry/llvmlite047.tar.xz` and the earlier collection; each call"
    " `source benchmarks/looptune_lent_setup.sh; cd /tmp`): pass 1"
    " `python3 -m optserve.looptune_training.measure_templates --jobs 15 --first-core 1 --pool-shapes 45"
    " --templates 64 --budget-s 530 --old-data"
    " data/looptune/measured.json.gz --out $OUT/templates_v2.json.gz`; pass 2 re-times its templates:"
    " `--templates-from data/looptune/templates_v2.json.gz --rounds 2 --budget-s 480 --out"
    " $OUT/templates_v2_pass2.json.gz`. Keep them under data/looptune/.",
    "2. Training, any machine (~10 min on 2 cores): `python -m optserve.looptune_training.train --data"
    " data/looptune/measured.json.gz --templates data/looptune/templates_v2.json.gz"
    " data/looptune/templates_v2_pass2.json.gz --run runs/looptune_v2 --bundle models/looptune`"
    " (add `--holdout-shapes 176` for the held-out score).",
    "3. Evaluation, one lent-machine call: `bash benchmarks/looptune_lent_run.sh 60 20 <earlier policy.pt>`"
    " (the earlier policy: `git show c77f2dd:models/looptune/policy.pt`, and its policy.json, in one folder)"
    " (= `optserve eval looptune --split test --search-shapes 20 --search-time 60 --jobs 15"
    " --first-core 1`).",
    "4. This page: the command in this script's docstring.",
    "",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", required=True, help="evaluation JSON (benchmarks/looptune_lent_run.sh)")
    parser.add_argument("--earlier", default=None, help="the earlier policy's evaluation JSON")
    parser.add_argument("--train", required=True, help="run folder of the bundled policy's training")
    parser.add_argument(
        "--holdout", default=None, help="run folder of the same training with --holdout-shapes"
    )
    parser.add_argument("--templates", nargs="+", required=True, help="the template passes trained on")
    parser.add_argument("--out", default="docs/bench/looptune.md")
    args = parser.parse_args()
    data = json.loads(Path(args.eval).read_text())
    out = Path(args.out)
    plot_path = out.with_suffix(".png")
    plot(data, str(plot_path))
    lines = [report(data, data["meta"].get("command", ""), str(plot_path))]
    if args.earlier:
        lines += earlier_section(data, json.loads(Path(args.earlier).read_text())) + [""]
    holdout = Path(args.holdout) if args.holdout else None
    lines += headroom_section(data, holdout) + [""]
    lines += template_section([Path(p) for p in args.templates]) + [""]
    lines += training_section(Path(args.train), holdout, out.with_name(out.stem + "_training.png"))
    lines += ["", *REPRODUCE, *NOTES]
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
