"""Q-learning from measured returns on the template tree (the policy's main training phase).

Every template (templates.py), padded with cursor moves to the 10-step episode, is one episode per
training shape, and its final schedule was measured (measure_templates.py). With gamma = 1 the
published reward (GFLOPS(s') - GFLOPS(s)) / peak telescopes, so the optimal Q-value of an action on these
episodes is the best final GFLOPS measured below it, minus the state's own GFLOPS, which is the same for
every action of the state. The network is fitted to that Bellman-optimal target in log space, relative to the
shape's mean over templates (measurements on the lent machine drift by tens of percent between cores and
minutes, but a shape's templates are measured back to back, so their ratios are what the data holds), with
the DQfD large-margin loss pushing every other available action below the best measured one.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from optserve.kernels.spec import LoopNestSpec
from optserve.looptune_training.templates import padded, play
from optserve.policies.env import ACTIONS, AgentState, observation
from optserve.policies.policy import QNetwork, action_mask, network_input, rollout


@dataclass
class TemplateData:
    """Measured templates: `value[s, t]` = mean over passes of log GFLOPS minus the shape's mean (nan: the
    template is unavailable on that shape)."""

    shapes: list[str]
    templates: list[list[str]]
    value: np.ndarray
    passes: int
    meta: dict


def load_templates(paths: list[Path]) -> TemplateData:
    """One or more passes of measure_templates.py over the same templates."""
    passes = []
    for path in paths:
        with gzip.open(path, "rt") as f:
            passes.append(json.load(f))
    templates = passes[0]["templates"]
    if any(p["templates"] != templates for p in passes):
        raise ValueError("the template passes measured different templates")
    shapes = sorted(set.union(*({r["shape"] for r in p["shapes"]} for p in passes)))
    stacked = []
    for p in passes:  # a pass cut short by its time budget misses some shapes: average what was measured
        by_shape = {r["shape"]: r["gflops"] for r in p["shapes"]}
        missing = [None] * len(templates)
        rows = [[g or np.nan for g in by_shape.get(s, missing)] for s in shapes]
        with warnings.catch_warnings():  # all-nan rows: shapes this pass did not reach
            warnings.simplefilter("ignore", RuntimeWarning)
            logs = np.log(np.array(rows, dtype=float))
            stacked.append(logs - np.nanmean(logs, axis=1, keepdims=True))
    with warnings.catch_warnings():  # all-nan cells: templates unavailable on a shape
        warnings.simplefilter("ignore", RuntimeWarning)
        value = np.nanmean(stacked, axis=0)
    return TemplateData(shapes, templates, value, len(passes), passes[0]["meta"])


@dataclass
class TreeBatch:
    """One row per (shape, tree node): network input, available actions, target per action (nan: off the
    tree), and the best measured action."""

    obs: np.ndarray
    mask: np.ndarray
    target: np.ndarray
    best: np.ndarray


def tree_rows(spec: LoopNestSpec, templates: list[list[str]], values: np.ndarray) -> TreeBatch:
    """The template tree of one shape: every state an available, padded template visits is a node, keyed by
    the state alone (the published observation has no step counter, so the same state reached at two depths
    must get one target: the best value measured through each of its actions)."""
    nodes: dict[tuple, AgentState] = {}
    targets: dict[tuple, np.ndarray] = {}
    for actions, value in zip(templates, values, strict=True):
        if math.isnan(value):
            continue
        states = play(spec, actions)
        if states is None:
            continue
        episode = padded(actions, states[-1])
        states = play(spec, episode)
        assert states is not None  # cursor moves are always available after an available template
        for state, action in zip(states[:-1], episode, strict=True):
            key = (state.schedule, state.cursor)
            if key not in nodes:
                nodes[key] = state
                targets[key] = np.full(len(ACTIONS), np.nan)
            row = targets[key]
            a = ACTIONS.index(action)
            row[a] = value if math.isnan(row[a]) else max(row[a], value)
    keys = list(nodes)
    obs = np.stack([network_input(observation(spec, nodes[k])) for k in keys])
    mask = np.stack([action_mask(nodes[k]) for k in keys])
    target = np.stack([targets[k] for k in keys]).astype(np.float32)
    best = np.nanargmax(target, axis=1)
    return TreeBatch(obs, mask, target, best)


def concat(batches: list[TreeBatch]) -> TreeBatch:
    return TreeBatch(
        *(np.concatenate([getattr(b, f) for b in batches]) for f in ("obs", "mask", "target", "best"))
    )


def tree_loss(q: QNetwork, obs, mask, target, best, margin: float) -> torch.Tensor:
    """Squared error on measured actions + DQfD margin: the best measured action beats every other available
    action by `margin`."""
    values = q(obs)
    measured = ~torch.isnan(target)
    regression = ((values - torch.nan_to_num(target)) ** 2)[measured].mean()
    taken = values.gather(1, best[:, None]).squeeze(1)
    bonus = torch.full_like(values, margin).scatter(1, best[:, None], 0.0)
    others = (values + bonus).masked_fill(~mask, -1e9).max(1).values
    return regression + (others - taken).mean()


def fit(
    q: QNetwork,
    rows: TreeBatch,
    epochs: int,
    lr: float,
    batch: int,
    margin: float,
    seed: int,
    device: str = "cpu",
    on_epoch=None,
) -> list[float]:
    """Minibatch Adam on `tree_loss`; the mean loss of each epoch."""
    gen = torch.Generator().manual_seed(seed)
    tensors = [
        torch.as_tensor(rows.obs, device=device),
        torch.as_tensor(rows.mask, device=device),
        torch.as_tensor(rows.target, device=device),
        torch.as_tensor(rows.best, device=device),
    ]
    opt = torch.optim.Adam(q.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    losses = []
    for epoch in range(epochs):
        order = torch.randperm(len(rows.obs), generator=gen).to(device)
        total = 0.0
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            loss = tree_loss(q, *(t[idx] for t in tensors), margin)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(q.parameters(), 10.0)
            opt.step()
            total += loss.item() * len(idx)
        schedule.step()
        losses.append(total / len(order))
        if on_epoch:
            on_epoch(epoch, losses[-1])
    return losses


def offline_score(q: QNetwork, data: TemplateData, shape_ids: list[int], spec_of) -> dict:
    """Greedy rollouts on measured shapes, scored by the measured template they end on: mean ratio to the
    base schedule and to the best template, and how often the rollout left the measured tree."""
    q = q.cpu().eval()
    base = data.templates.index([])
    final_nests = {}
    ratios_base, ratios_best, off_tree = [], [], 0
    for s in shape_ids:
        spec = spec_of(data.shapes[s])
        final = rollout(q, spec).final.schedule.compute
        final_nests.clear()
        for t, actions in enumerate(data.templates):
            states = play(spec, actions)
            if states is not None and not math.isnan(data.value[s, t]):
                final_nests.setdefault(states[-1].schedule.compute, data.value[s, t])
        if final not in final_nests:
            off_tree += 1
            continue
        ratios_base.append(math.exp(final_nests[final] - data.value[s, base]))
        ratios_best.append(math.exp(final_nests[final] - np.nanmax(data.value[s])))
    oracle = [math.exp(np.nanmax(data.value[s]) - data.value[s, base]) for s in shape_ids]
    return {
        "shapes": len(shape_ids),
        "off_tree": off_tree,
        "mean_speedup_over_base": float(np.mean(ratios_base)) if ratios_base else None,
        "geomean_fraction_of_best_template": float(np.exp(np.mean(np.log(ratios_best))))
        if ratios_best
        else None,
        "oracle_mean_speedup_over_base": float(np.mean(oracle)),
    }
