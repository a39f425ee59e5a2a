"""Train the LoopTune policy: Q-learning from measured returns on the template tree, plus a cost model.

Measuring a schedule costs tens of milliseconds and a shared machine's cores drift in speed, so the policy
learns from
templates measured on every training shape (`looptune_training/measure_templates.py`, tree_q.py): exact,
measured Bellman targets for the episodes the templates span, with a DQfD margin on the best measured action.
A GFLOPS cost model (thesis §3.10.2) is fitted to every measured nest (collect.py and the
template passes): it gives the service's predicted GFLOPS and the rewards of the optional DQN fine-tuning
phase (`--iterations`, a DQN-family learner run on CPU without Ray: double DQN with n-step returns,
replay, epsilon-greedy exploration, a soft-updated target network and the best measured template of each shape
as DQfD demonstrations; reward = (GFLOPS(s') - GFLOPS(s)) / peak, predicted; 10-step episodes).

    python -m optserve.looptune_training.train --data data/looptune/measured.json.gz \
        --templates data/looptune/templates.json.gz data/looptune/templates_pass2.json.gz \
        --run runs/looptune --bundle models/looptune

Writes runs/<run>/tree_curve.csv, cost_model.csv, tree_policy/ (and learning_curve.csv, checkpoint.pt for the
DQN phase; resume with --resume) and the bundle.
"""

from __future__ import annotations

import argparse
import csv
import functools
import gzip
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.looptune_training.dataset import Benchmark, train_test_split
from optserve.looptune_training.templates import padded, play
from optserve.looptune_training.tree_q import (
    TemplateData,
    concat,
    fit,
    load_templates,
    offline_score,
    tree_rows,
)
from optserve.policies.env import ACTIONS, EPISODE_STEPS, AgentState, apply_action, observation
from optserve.policies.policy import (
    CostModel,
    QNetwork,
    action_mask,
    cost_input,
    network_input,
    save_bundle,
)

N_ACTIONS = len(ACTIONS)
MIN_GFLOPS = 1.0  # refused schedules (0 GFLOPS) are fitted as 1 GFLOPS: very bad, still finite in log space


@dataclass
class TrainConfig:
    cost_hidden: tuple[int, ...] = (256, 256, 256)
    cost_epochs: int = 15
    q_hidden: tuple[int, ...] = (256, 256, 256)
    gamma: float = 0.95  # thesis
    n_step: int = 3
    lr: float = 3e-4
    batch: int = 256
    envs: int = 128
    iterations: int = 0  # DQN fine-tuning; each: one 10-step episode in every env, then updates
    updates_per_step: int = 2
    replay: int = 200_000
    demo_fraction: float = 0.25
    margin: float = 0.05
    pretrain_updates: int = 2000
    eps_start: float = 0.6
    eps_end: float = 0.05
    tau: float = 0.01
    eval_every: int = 10
    eval_shapes: int = 128
    tree_epochs: int = 30
    tree_lr: float = 1e-3
    tree_batch: int = 512
    holdout_shapes: int = 0  # training shapes kept out of the tree phase, to score it on unseen shapes
    seed: int = 0
    device: str = "cpu"
    time_budget_s: float | None = None  # stop the DQN phase early (with a final evaluation) after this


def parse_nest(text: str) -> tuple[Loop, ...]:
    loops = []
    for part in text.split(";"):
        index, size, tail = part.split(":")
        loops.append(Loop(index, int(size), int(tail)))
    return tuple(loops)


def load_measured(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def benchmark(name: str) -> Benchmark:
    m, k, n = (int(x) for x in name.removeprefix("mm").split("_"))
    return Benchmark(name, m, k, n)


@functools.cache
def spec_of(bench: Benchmark) -> LoopNestSpec:
    return bench.spec()


# ---- cost model -------------------------------------------------------------------------------------------


def cost_dataset(data: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, log GFLOPS, record id) of every measured nest (a record: one shape timed by one run)."""
    features, targets, groups = [], [], []
    for gid, record in enumerate(data["shapes"]):
        spec = benchmark(record["shape"]).spec()
        for text, gflops in record["nests"]:
            features.append(cost_input(spec, Schedule(parse_nest(text), ())))
            targets.append(math.log(max(gflops, MIN_GFLOPS)))
            groups.append(gid)
    return np.stack(features), np.array(targets, np.float32), np.array(groups)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3:
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def train_cost_model(data: dict, cfg: TrainConfig, run: Path) -> tuple[CostModel, dict]:
    """Fit log GFLOPS on 90% of the measured shapes; report error and rank correlation (within each record of
    a held-out shape) on the rest. Every record of a shape falls on the same side."""
    x, y, groups = cost_dataset(data)
    names = sorted({r["shape"] for r in data["shapes"]})
    n_shapes = len(names)
    rng = np.random.default_rng(cfg.seed)
    held_names = {names[i] for i in rng.permutation(n_shapes)[: max(1, n_shapes // 10)]}
    held_out = {gid for gid, r in enumerate(data["shapes"]) if r["shape"] in held_names}
    val = np.array([g in held_out for g in groups])
    dev = torch.device(cfg.device)
    xt, yt = torch.from_numpy(x[~val]).to(dev), torch.from_numpy(y[~val]).to(dev)
    xv, yv = torch.from_numpy(x[val]).to(dev), torch.from_numpy(y[val]).to(dev)
    torch.manual_seed(cfg.seed)
    model = CostModel(list(cfg.cost_hidden)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.cost_epochs)
    rows = []
    for epoch in range(cfg.cost_epochs):
        model.train()
        perm = torch.randperm(len(xt), device=dev)
        total = 0.0
        for i in range(0, len(xt), 512):
            idx = perm[i : i + 512]
            loss = nn.functional.mse_loss(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        model.eval()
        with torch.no_grad():
            pred_v = model(xv)
            val_rmse = float(torch.sqrt(nn.functional.mse_loss(pred_v, yv)))
        rows.append(
            {"epoch": epoch + 1, "train_rmse_log": math.sqrt(total / len(xt)), "val_rmse_log": val_rmse}
        )
        print(f"cost model epoch {epoch + 1}: train rmse {rows[-1]['train_rmse_log']:.3f} val {val_rmse:.3f}")
    pred_v = pred_v.cpu().numpy()
    model.cpu()
    vgroups = groups[val]
    rhos = [spearman(pred_v[vgroups == g], y[val][vgroups == g]) for g in sorted(held_out)]
    # how often the nest the model ranks first is within 10% of the fastest measured one, per held-out shape
    top_hits = []
    for g in sorted(held_out):
        sel = vgroups == g
        top_hits.append(float(y[val][sel][np.argmax(pred_v[sel])] >= y[val][sel].max() + math.log(0.9)))
    meta = {
        "samples": int(len(x)),
        "shapes": n_shapes,
        "held_out_shapes": len(held_names),
        "records": len(data["shapes"]),
        "val_rmse_log": rows[-1]["val_rmse_log"],
        "val_spearman_per_shape": float(np.nanmean(rhos)),
        "val_top1_within_10pct": float(np.mean(top_hits)),
        "peak_gflops": data["meta"]["peak_gflops"],
        "measured_on": data["meta"]["host_target"],
    }
    write_csv(run / "cost_model.csv", rows)
    print(f"cost model: {json.dumps(meta)}")
    return model, meta


# ---- model-based environment ------------------------------------------------------------------------------


class PredictedGflops:
    """Cost-model GFLOPS per (shape, compute nest), computed in batches and cached."""

    def __init__(self, model: CostModel):
        self.model = model
        self.cache: dict[tuple[str, tuple], float] = {}

    def __call__(self, items: list[tuple[Benchmark, Schedule]]) -> np.ndarray:
        keys = [(b.name, s.compute) for b, s in items]
        missing = {}
        for key, (b, s) in zip(keys, items, strict=True):
            if key not in self.cache and key not in missing:
                missing[key] = cost_input(spec_of(b), s)
        if missing:
            values = self.model.predict_gflops(np.stack(list(missing.values())))
            self.cache.update(zip(missing, values.tolist(), strict=True))
        return np.array([self.cache[k] for k in keys], dtype=np.float32)


def features_and_masks(items: list[tuple[Benchmark, AgentState]]) -> tuple[np.ndarray, np.ndarray]:
    obs = np.stack([network_input(observation(spec_of(b), s)) for b, s in items])
    masks = np.stack([action_mask(s) for _, s in items])
    return obs, masks


class Replay:
    """Ring buffer of n-step transitions: (s, a, R, s', mask(s'), discount to s' or 0 at the end)."""

    def __init__(self, capacity: int):
        self.obs = np.zeros((capacity, 200), np.float32)
        self.next_obs = np.zeros((capacity, 200), np.float32)
        self.action = np.zeros(capacity, np.int64)
        self.ret = np.zeros(capacity, np.float32)
        self.next_mask = np.zeros((capacity, N_ACTIONS), bool)
        self.discount = np.zeros(capacity, np.float32)
        self.capacity, self.size, self.pos = capacity, 0, 0

    def add(self, obs, action, ret, next_obs, next_mask, discount) -> None:
        for i in range(len(obs)):
            p = self.pos
            self.obs[p], self.action[p], self.ret[p] = obs[i], action[i], ret[i]
            self.next_obs[p], self.next_mask[p], self.discount[p] = next_obs[i], next_mask[i], discount[i]
            self.pos = (p + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, n: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
        idx = rng.integers(0, self.size, n)
        return tuple(
            torch.from_numpy(a[idx]).to(device)
            for a in (self.obs, self.action, self.ret, self.next_obs, self.next_mask, self.discount)
        )


def n_step_transitions(obs, actions, rewards, masks, gamma: float, n: int) -> tuple[np.ndarray, ...]:
    """From episodes stacked [T+1, B, ...] (obs, masks) and [T, B] (actions, rewards): n-step transitions."""
    steps = len(actions)
    out = []
    for t in range(steps):
        horizon = min(n, steps - t)
        ret = sum(gamma**i * rewards[t + i] for i in range(horizon))
        end = t + horizon
        discount = np.full(len(ret), gamma**horizon if end < steps else 0.0, np.float32)
        out.append((obs[t], actions[t], ret, obs[end], masks[end], discount))
    return tuple(np.concatenate([o[i] for o in out]) for i in range(6))


def template_demos(templates: TemplateData, shape_ids: list[int]) -> list[tuple[Benchmark, list[str]]]:
    """The best measured template of each shape, padded to a full episode."""
    demos = []
    for s in shape_ids:
        bench = benchmark(templates.shapes[s])
        actions = templates.templates[int(np.nanargmax(templates.value[s]))]
        states = play(spec_of(bench), actions)
        if states is not None:
            demos.append((bench, padded(actions, states[-1])))
    return demos


def demo_episodes(data: dict) -> list[tuple[Benchmark, list[str]]]:
    """The fastest measured search trajectory of every collected shape (beam or random)."""
    demos = []
    for record in data["shapes"]:
        best = max((record["beam"], record["random"]), key=lambda r: r["gflops"] or 0)
        if best["actions"]:
            demos.append((benchmark(record["shape"]), best["actions"]))
    return demos


def replay_demos(demos, predicted: PredictedGflops, peak: float, cfg: TrainConfig) -> Replay:
    buffer = Replay(sum(len(a) for _, a in demos) + 1)
    for bench, actions in demos:
        state = AgentState(Schedule.base(spec_of(bench)))
        states = [state]
        for action in actions:
            state = apply_action(state, action)
            states.append(state)
        obs, masks = features_and_masks([(bench, s) for s in states])
        gflops = predicted([(bench, s.schedule) for s in states])
        rewards = (gflops[1:] - gflops[:-1]) / peak
        idx = np.array([ACTIONS.index(a) for a in actions])
        buffer.add(
            *n_step_transitions(
                obs[:, None], idx[:, None], rewards[:, None], masks[:, None], cfg.gamma, cfg.n_step
            )
        )
    return buffer


# ---- DQN ---------------------------------------------------------------------------------------------


def td_loss(q: QNetwork, target: QNetwork, batch, margin: float | None = None) -> torch.Tensor:
    obs, action, ret, next_obs, next_mask, discount = batch
    q_all = q(obs)
    q_taken = q_all.gather(1, action[:, None]).squeeze(1)
    with torch.no_grad():
        online_next = q(next_obs).masked_fill(~next_mask, -1e9)
        best_next = online_next.argmax(1, keepdim=True)
        next_value = target(next_obs).gather(1, best_next).squeeze(1)
        next_value = torch.where(next_mask.any(1), next_value, torch.zeros_like(next_value))
        y = ret + discount * next_value
    loss = nn.functional.smooth_l1_loss(q_taken, y)
    if margin is not None:  # DQfD: the demonstrated action must beat every other by `margin`
        bonus = torch.full_like(q_all, margin).scatter(1, action[:, None], 0.0)
        loss = loss + ((q_all + bonus).max(1).values - q_taken).mean()
    return loss


@torch.no_grad()
def greedy_eval(q: QNetwork, shapes: list[Benchmark], predicted: PredictedGflops, device: str) -> dict:
    """Greedy 10-step rollouts on `shapes` under the cost model: mean base / final / best-visited GFLOPS."""
    states = [AgentState(Schedule.base(spec_of(b))) for b in shapes]
    base = predicted([(b, s.schedule) for b, s in zip(shapes, states, strict=True)])
    best = base.copy()
    for _ in range(EPISODE_STEPS):
        obs, masks = features_and_masks(list(zip(shapes, states, strict=True)))
        qv = greedy_choices(q, obs, masks, device)
        states = [
            apply_action(s, ACTIONS[a]) if m.any() else s for s, a, m in zip(states, qv, masks, strict=True)
        ]
        final = predicted([(b, s.schedule) for b, s in zip(shapes, states, strict=True)])
        best = np.maximum(best, final)
    return {
        "base": float(base.mean()),
        "final": float(final.mean()),
        "best_visited": float(best.mean()),
        "final_over_base_geomean": float(np.exp(np.mean(np.log(final / base)))),
    }


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def train_dqn(
    data: dict,
    cost_model: CostModel,
    cfg: TrainConfig,
    run: Path,
    resume: bool,
    demos: list[tuple[Benchmark, list[str]]] | None = None,
    init: QNetwork | None = None,
) -> tuple[QNetwork, dict]:
    """DQN on cost-model rewards, with `demos` (default: the collection's best search trajectories) as DQfD
    demonstrations; starts from `init` (skipping demonstration pretraining) when given."""
    random.seed(cfg.seed)
    np_rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    peak = data["meta"]["peak_gflops"]
    predicted = PredictedGflops(cost_model)
    train, _ = train_test_split()
    eval_shapes = random.Random(cfg.seed + 1).sample(train, cfg.eval_shapes)
    q, target = QNetwork(list(cfg.q_hidden)).to(cfg.device), QNetwork(list(cfg.q_hidden)).to(cfg.device)
    if init is not None:
        q.load_state_dict(init.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=cfg.lr)
    demo_buffer = replay_demos(demos if demos is not None else demo_episodes(data), predicted, peak, cfg)
    replay = Replay(cfg.replay)
    curve: list[dict] = []
    start_iteration, start = 0, time.time()
    ckpt_path = run / "checkpoint.pt"
    if resume and ckpt_path.is_file():
        # weights_only: tensors and plain values only, so a checkpoint file cannot run code when loaded
        ckpt = torch.load(ckpt_path, weights_only=True, map_location=cfg.device)
        q.load_state_dict(ckpt["q"])
        target.load_state_dict(ckpt["target"])
        opt.load_state_dict(ckpt["opt"])
        start_iteration, curve = ckpt["iteration"], ckpt["curve"]
        np_rng.bit_generator.state = ckpt["np_rng_state"]
        print(f"resumed at iteration {start_iteration} (replay refills from new episodes)")
    else:
        target.load_state_dict(q.state_dict())
        loss = torch.zeros(())
        for i in range(0 if init is not None else cfg.pretrain_updates):
            loss = td_loss(q, target, demo_buffer.sample(np_rng, cfg.batch, cfg.device), cfg.margin)
            opt.zero_grad()
            loss.backward()
            opt.step()
            soft_update(target, q, cfg.tau)
            if (i + 1) % 500 == 0:
                print(f"demo pretraining {i + 1}/{cfg.pretrain_updates}: loss {loss.item():.4f}")
        curve.append(
            {
                "iteration": 0,
                "episodes": 0,
                "epsilon": cfg.eps_start,
                "loss": loss.item(),
                "seconds": time.time() - start,
                **greedy_eval(q, eval_shapes, predicted, cfg.device),
            }
        )
        print(curve[-1])
        # the network before the DQN phase, kept to compare with the DQN-trained one on held-out shapes
        save_bundle(run / "pretrained_policy", q, {"algorithm": "before the DQN phase"})
    loss_value = float("nan")
    for iteration in range(start_iteration, cfg.iterations):
        frac = iteration / max(1, cfg.iterations - 1)
        if cfg.time_budget_s:  # anneal by the clock too, so a run cut short still ends greedy
            frac = min(1.0, max(frac, (time.time() - start) / cfg.time_budget_s))
        epsilon = cfg.eps_start + (cfg.eps_end - cfg.eps_start) * frac
        shapes = [train[i] for i in np_rng.integers(0, len(train), cfg.envs)]
        states = [AgentState(Schedule.base(spec_of(b))) for b in shapes]
        obs_t, mask_t, act_t, rew_t = [], [], [], []
        gflops = predicted([(b, s.schedule) for b, s in zip(shapes, states, strict=True)])
        for _ in range(EPISODE_STEPS):
            obs, masks = features_and_masks(list(zip(shapes, states, strict=True)))
            qv = greedy_choices(q, obs, masks, cfg.device)
            actions = np.zeros(cfg.envs, np.int64)
            for i, m in enumerate(masks):
                if not m.any():  # nothing available: the step is a no-op (published semantics)
                    actions[i] = 0
                elif np_rng.random() < epsilon:
                    actions[i] = np_rng.choice(np.flatnonzero(m))
                else:
                    actions[i] = qv[i]
            states = [
                apply_action(s, ACTIONS[a]) if m[a] else s
                for s, a, m in zip(states, actions, masks, strict=True)
            ]
            new_gflops = predicted([(b, s.schedule) for b, s in zip(shapes, states, strict=True)])
            obs_t.append(obs)
            mask_t.append(masks)
            act_t.append(actions)
            rew_t.append((new_gflops - gflops) / peak)
            gflops = new_gflops
        obs, masks = features_and_masks(list(zip(shapes, states, strict=True)))
        obs_t.append(obs)
        mask_t.append(masks)
        replay.add(
            *n_step_transitions(
                np.stack(obs_t), np.stack(act_t), np.stack(rew_t), np.stack(mask_t), cfg.gamma, cfg.n_step
            )
        )
        n_demo = int(cfg.batch * cfg.demo_fraction)
        for _ in range(cfg.updates_per_step * EPISODE_STEPS):
            loss = td_loss(q, target, replay.sample(np_rng, cfg.batch - n_demo, cfg.device))
            loss = (
                loss
                + td_loss(q, target, demo_buffer.sample(np_rng, n_demo, cfg.device), cfg.margin)
                * n_demo
                / cfg.batch
            )
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(q.parameters(), 10.0)
            opt.step()
            soft_update(target, q, cfg.tau)
            loss_value = loss.item()
        out_of_time = cfg.time_budget_s is not None and time.time() - start > cfg.time_budget_s
        if (iteration + 1) % cfg.eval_every == 0 or iteration + 1 == cfg.iterations or out_of_time:
            row = {
                "iteration": iteration + 1,
                "episodes": (iteration + 1) * cfg.envs,
                "epsilon": epsilon,
                "loss": loss_value,
                "seconds": time.time() - start,
                **greedy_eval(q, eval_shapes, predicted, cfg.device),
            }
            curve.append(row)
            print(json.dumps(row), flush=True)
            write_csv(run / "learning_curve.csv", curve)
            torch.save(
                {
                    "q": q.state_dict(),
                    "target": target.state_dict(),
                    "opt": opt.state_dict(),
                    "iteration": iteration + 1,
                    "curve": curve,
                    "np_rng_state": np_rng.bit_generator.state,  # plain values: weights_only loads it
                    "config": vars(cfg),
                },
                ckpt_path,
            )
        if out_of_time:
            print(f"time budget reached after {iteration + 1} iterations")
            break
    meta = {
        "algorithm": "double DQN, 3-step returns, replay, DQfD demonstrations, cost-model rewards",
        "episodes": curve[-1]["episodes"],
        "final_eval_train_shapes": curve[-1],
        "config": vars(cfg),
    }
    return q.cpu(), meta


# ---- Q-learning on the measured template tree ---------------------------------------------------------


def train_tree(templates: TemplateData, cfg: TrainConfig, run: Path) -> tuple[QNetwork, dict]:
    """Fit the Q-network to the measured tree (tree_q.py); score it on fitted and held-out shapes."""
    test_names = {b.name for b in train_test_split()[1]}
    leaked = test_names.intersection(templates.shapes)
    if leaked:
        raise ValueError(f"template data holds {len(leaked)} test-split shapes (e.g. {sorted(leaked)[0]})")
    ids = list(range(len(templates.shapes)))
    random.Random(cfg.seed).shuffle(ids)
    held_out, fitted = ids[: cfg.holdout_shapes], ids[cfg.holdout_shapes :]
    start = time.time()
    rows = concat(
        [
            tree_rows(spec_of(benchmark(templates.shapes[s])), templates.templates, templates.value[s])
            for s in tqdm(fitted, desc="template trees", unit="shape", disable=None)
        ]
    )
    torch.manual_seed(cfg.seed)
    q = QNetwork(list(cfg.q_hidden)).to(cfg.device)
    curve: list[dict] = []

    def logged(epoch: int, loss: float) -> None:
        curve.append({"epoch": epoch + 1, "loss": loss, "seconds": time.time() - start})
        print(json.dumps(curve[-1]), flush=True)

    fit(q, rows, cfg.tree_epochs, cfg.tree_lr, cfg.tree_batch, cfg.margin, cfg.seed, cfg.device, logged)
    write_csv(run / "tree_curve.csv", curve)
    q = q.cpu()

    def spec_by_name(name: str) -> LoopNestSpec:
        return spec_of(benchmark(name))

    meta = {
        "algorithm": "Q-learning from measured returns on the template tree, DQfD margin",
        "templates": len(templates.templates),
        "template_passes": templates.passes,
        "shapes_fitted": len(fitted),
        "tree_rows": int(len(rows.obs)),
        "score_fitted_shapes": offline_score(q, templates, fitted[:300], spec_by_name),
        "score_held_out_shapes": offline_score(q, templates, held_out, spec_by_name) if held_out else None,
        "config": vars(cfg),
    }
    print(json.dumps({k: meta[k] for k in ("score_fitted_shapes", "score_held_out_shapes")}))
    save_bundle(run / "tree_policy", q, meta)
    return q, meta


@torch.no_grad()
def greedy_choices(q: QNetwork, obs: np.ndarray, masks: np.ndarray, device: str) -> np.ndarray:
    values = q(torch.from_numpy(obs).to(device)).cpu()
    return values.masked_fill(~torch.from_numpy(masks), -1e9).argmax(1).numpy()


def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters(), strict=True):
            t.mul_(1 - tau).add_(s, alpha=tau)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", nargs="*", default=["data/looptune/measured.json.gz"], help="collect.py outputs"
    )
    parser.add_argument("--templates", nargs="*", default=[], help="measure_templates.py passes")
    parser.add_argument("--run", default="runs/looptune", help="folder for curves and checkpoints")
    parser.add_argument("--bundle", default="models/looptune", help="where to write the served policy")
    parser.add_argument("--tree-epochs", type=int, default=TrainConfig.tree_epochs)
    parser.add_argument("--margin", type=float, default=TrainConfig.margin, help="DQfD large-margin")
    parser.add_argument("--holdout-shapes", type=int, default=0, help="training shapes kept out of the tree")
    parser.add_argument("--iterations", type=int, default=0, help="DQN fine-tuning iterations (0: none)")
    parser.add_argument("--envs", type=int, default=TrainConfig.envs)
    parser.add_argument("--cost-epochs", type=int, default=TrainConfig.cost_epochs)
    parser.add_argument("--pretrain-updates", type=int, default=TrainConfig.pretrain_updates)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="torch device for the updates (cpu, cuda)")
    parser.add_argument("--time-budget-s", type=float, default=None, help="end the DQN phase after this")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--resume", action="store_true", help="continue the DQN phase from <run>/checkpoint.pt"
    )
    args = parser.parse_args(argv)
    if not args.templates and args.iterations <= 0:
        parser.error("nothing to train: give --templates, or --iterations for the DQN phase")
    cfg = TrainConfig(
        iterations=args.iterations,
        envs=args.envs,
        cost_epochs=args.cost_epochs,
        pretrain_updates=args.pretrain_updates,
        tree_epochs=args.tree_epochs,
        margin=args.margin,
        holdout_shapes=args.holdout_shapes,
        seed=args.seed,
        device=args.device,
        time_budget_s=args.time_budget_s,
    )
    torch.set_num_threads(args.threads)
    run = Path(args.run)
    run.mkdir(parents=True, exist_ok=True)
    collections = [load_measured(Path(p)) for p in args.data]
    passes = [load_measured(Path(p)) for p in args.templates]
    meta_source = (collections or passes)[0]["meta"]
    data = {
        "meta": meta_source,
        "shapes": [r for c in collections for r in c["shapes"]] + [r for p in passes for r in p["shapes"]],
    }
    cost_path = run / "cost_model.pt"
    if args.resume and cost_path.is_file():
        saved = torch.load(cost_path, weights_only=True)
        cost_model, cost_meta = CostModel(list(cfg.cost_hidden)), saved["meta"]
        cost_model.load_state_dict(saved["state"])
        cost_model.eval()
    else:
        cost_model, cost_meta = train_cost_model(data, cfg, run)
        torch.save({"state": cost_model.state_dict(), "meta": cost_meta}, cost_path)
    q, meta, demos = None, {}, None
    if args.templates:
        templates = load_templates([Path(p) for p in args.templates])
        q, meta = train_tree(templates, cfg, run)
        demos = template_demos(templates, list(range(len(templates.shapes))))
    if cfg.iterations > 0:
        q, dqn_meta = train_dqn(data, cost_model, cfg, run, args.resume, demos=demos, init=q)
        meta = {**meta, "dqn": dqn_meta}
    meta.update(
        {
            "cost_model": cost_meta,
            "command": "python -m optserve.looptune_training.train " + " ".join(sys.argv[1:]),
            "trained_for": meta_source["host_target"],
            "peak_gflops": meta_source["peak_gflops"],
        }
    )
    save_bundle(Path(args.bundle), q, meta, cost_model, cost_meta)  # type: ignore[arg-type]
    print(f"bundle written to {args.bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
