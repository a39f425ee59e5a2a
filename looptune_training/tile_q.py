"""Train the tile Q-network: Q-values of tile actions (policies/tile_actions.py) from measured returns.

A tile action applies one template to the base schedule and ends the episode, so its Q-value at the base
state is the measured return of that one step. As in tree_q.py it is fitted in log GFLOPS relative to the
shape's mean over actions (the actions of a shape are timed back to back, so their ratios are what the data
holds), with the DQfD margin pushing every other measured action below the best one. The data are the
measurements of benchmarks/looptune_tile_actions.py on `suites.wide_training_suite` (sizes 16..2048, every
kind, no held-out shape: checked here too).

    python -m optserve.looptune_training.tile_q --data data/labels/looptune/tile_actions.json.gz \
        --run runs/looptune_tileq --bundle models/looptune        # writes tile_policy.pt / tile_policy.json

The measurements behind the bundled network (15 min of timing) are committed gzipped in data/labels/looptune/,
so the network is retrained from them without re-timing.

Scores (k-fold over the training shapes, from the measured data, nothing re-timed): the fraction of the
shape's best measured action that the network's pick reaches, next to the cover alone and the pick measured
with the cover (the decision's candidates). Then the network is fitted on every shape and bundled.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from optserve.kernels.jit import host_target
from optserve.kernels.schedule import Schedule
from optserve.looptune_training.suites import HELD_OUT, case_from_name
from optserve.looptune_training.tree_q import TreeBatch, fit
from optserve.policies.env import AgentState, observation
from optserve.policies.policy import TILE_POLICY, QNetwork, greedy_action, network_input, save_bundle
from optserve.policies.tile_actions import TILE_ACTION, tile_mask
from optserve.policies.tiles import load_cover


def load(path: Path) -> dict:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    data = json.loads(text)
    held = {c.name for c in HELD_OUT}.intersection(r["shape"] for r in data["shapes"])
    if held:
        raise ValueError(f"{path} holds {len(held)} held-out shapes (e.g. {sorted(held)[0]})")
    return data


def rows(data: dict) -> TreeBatch:
    """One row per shape: the base state's network input, the measured actions, their relative log GFLOPS."""
    obs, masks, targets = [], [], []
    for record in data["shapes"]:
        spec = case_from_name(record["shape"]).spec()
        obs.append(network_input(observation(spec, AgentState(Schedule.base(spec)))))
        gflops = np.array(record["gflops"], dtype=float)
        measured = gflops > 0
        logs = np.where(measured, np.log(np.where(measured, gflops, 1.0)), np.nan)
        targets.append((logs - np.nanmean(logs)).astype(np.float32))
        masks.append(measured)
    target = np.stack(targets)
    return TreeBatch(np.stack(obs), np.stack(masks), target, np.nanargmax(target, axis=1))


def subset(batch: TreeBatch, ids: np.ndarray) -> TreeBatch:
    return TreeBatch(batch.obs[ids], batch.mask[ids], batch.target[ids], batch.best[ids])


def train(
    batch: TreeBatch, actions: list[str], hidden: list[int], epochs: int, lr: float, seed: int
) -> QNetwork:
    torch.manual_seed(seed)
    q = QNetwork(hidden, actions)
    fit(q, batch, epochs, lr, batch=32, margin=0.05, seed=seed)
    return q.eval()


@torch.no_grad()
def picks(q: QNetwork, batch: TreeBatch, available: np.ndarray) -> np.ndarray:
    """The greedy tile action per row among the actions the target can run."""
    values = q(torch.as_tensor(batch.obs)).numpy()
    return np.array([greedy_action(v, available) for v in values])


def fractions(batch: TreeBatch, chosen: np.ndarray, cover: np.ndarray) -> dict:
    """Geomean fraction of each shape's best measured action: the pick alone, the cover alone, both."""
    best = np.nanmax(batch.target, axis=1)
    pick = batch.target[np.arange(len(chosen)), chosen]
    pick = np.where(np.isnan(pick), -np.inf, pick)  # a pick not measured on the shape counts as refused
    cover_best = np.nanmax(np.where(cover[None], batch.target, np.nan), axis=1)
    with np.errstate(divide="ignore"):
        return {
            "pick": float(np.exp(np.mean(np.maximum(pick - best, math.log(1e-3))))),
            "cover": float(np.exp(np.mean(cover_best - best))),
            "pick_and_cover": float(np.exp(np.mean(np.maximum(pick, cover_best) - best))),
            "pick_is_best": float(np.mean(pick >= best - 1e-6)),
        }


def cross_validate(batch, actions, available, cover, cfg: dict, folds: int, seed: int) -> dict:
    order = np.random.default_rng(seed).permutation(len(batch.obs))
    chosen = np.zeros(len(order), dtype=int)
    for fold in range(folds):
        held = order[fold::folds]
        kept = np.setdiff1d(order, held)
        q = train(subset(batch, kept), actions, cfg["hidden"], cfg["epochs"], cfg["lr"], seed)
        chosen[held] = picks(q, subset(batch, held), available)
    return fractions(batch, chosen, cover)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/looptune/tile_actions.json", help="looptune_tile_actions.py")
    parser.add_argument("--run", default="runs/looptune_tileq", help="folder for the scores")
    parser.add_argument("--bundle", default="models/looptune", help="where to write the served policy")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--folds", type=int, default=5, help="k-fold score over the training shapes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.time()
    data = load(Path(args.data))
    actions = data["actions"]
    batch = rows(data)
    available = tile_mask(actions, host_target())
    cover_names = {TILE_ACTION + t.name() for t in load_cover()}
    cover = np.array([a in cover_names for a in actions])
    cfg = {"hidden": args.hidden, "epochs": args.epochs, "lr": args.lr}
    score = cross_validate(batch, actions, available, cover, cfg, args.folds, args.seed)
    first = int(np.argmax(np.nanmean(np.where(np.isnan(batch.target), -3.0, batch.target), axis=0)))
    single = fractions(batch, np.full(len(batch.obs), first), cover)["pick"]
    print(json.dumps({"k_fold": score, "best_single_action": [actions[first], single]}), flush=True)
    q = train(batch, actions, args.hidden, args.epochs, args.lr, args.seed)
    meta = {
        "algorithm": "Q-values of tile actions from measured one-step returns (log GFLOPS relative to the"
        " shape's mean), DQfD margin",
        "shapes": len(batch.obs),
        "kinds": sorted({r["kind"] for r in data["shapes"]}),
        "tile_actions": len(actions),
        "score_k_fold": {"folds": args.folds, **score},
        "best_single_action": {"action": actions[first], "fraction_of_best": single},
        "config": {**cfg, "batch": 32, "margin": 0.05, "seed": args.seed},
        "data": {k: data["meta"][k] for k in ("measured_on", "machine", "date", "command", "rounds")},
        "command": "python -m optserve.looptune_training.tile_q " + " ".join(argv or sys.argv[1:]),
        "trained_for": data["meta"]["measured_on"],
        "seconds": round(time.time() - start, 1),
    }
    run = Path(args.run)
    run.mkdir(parents=True, exist_ok=True)
    (run / "score.json").write_text(json.dumps(meta, indent=1) + "\n")
    save_bundle(Path(args.bundle), q, meta, name=Path(TILE_POLICY).stem)
    print(f"bundle written to {args.bundle} ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
