"""The LoopTune policy: a Q-network over the published 10 x 20 state that picks 10 schedule edits greedily.

Network input (`network_input`): the state of `env.observation` with the two size columns (loop size, tail)
mapped through log2(1 + x) / 8 so every feature is O(1); cursor bit, compute bit and the 16 stride-histogram
bins are used as published. Output: one Q-value per action in `env.ACTIONS`. A rollout takes the available
action of highest Q-value (ties: the first in ACTIONS order) for 10 steps from the base schedule; unavailable
actions are never chosen (published LoopTune lets them be no-ops). `polish` then measures the distinct
schedules the rollout visited and keeps the fastest (the short measured polish of the issue).

A bundle may instead hold a tile Q-network (policies/tile_actions.py: one action per tile template, the
cache-level tilings the published actions cannot write): its rollout is one step, the fitting template of
highest Q-value applied to the base schedule (looptune_training/tile_q.py trains it). It is bundled as
`tile_policy.pt`/`.json` beside the 10-step policy; the quick decision uses it where
`looptune.decision_policy_path` names it (`decision_policy_path`).

The bundle is `policy.pt` (a state dict) next to `policy.json` (layer sizes, actions, feature version,
how it was trained). The same folder may hold `cost_model.pt`/`cost_model.json`, a GFLOPS predictor over
the compute nest (training reward and the service's predicted GFLOPS).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from optserve.kernels.codegen import Target
from optserve.kernels.jit import host_target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.policies.env import (
    ACTIONS,
    EPISODE_STEPS,
    LOOP_FEATURES,
    MAX_LOOPS,
    AgentState,
    Evaluator,
    SearchOutcome,
    apply_action,
    available_actions,
    observation,
)
from optserve.policies.tile_actions import apply_tile, is_tile_action_space, tile_mask

FEATURE_VERSION = "looptune-10x20-log2size-v1"
INPUT_SIZE = MAX_LOOPS * LOOP_FEATURES
TILE_POLICY = "tile_policy.pt"  # the tile Q-network's bundle name, beside policy.pt
SIZE_SCALE = 8.0  # log2(1 + 256) ~ 8: the dataset's largest size maps to ~1


class PolicyError(ValueError):
    """The bundle is missing, malformed or was built for other features or actions."""


def network_input(state_features: np.ndarray) -> np.ndarray:
    """The published 10 x 20 state, sizes and tails log-scaled, flattened to 200 float32 values."""
    x = np.array(state_features, dtype=np.float32, copy=True)
    x[..., 1:3] = np.log2(1.0 + x[..., 1:3]) / SIZE_SCALE
    return x.reshape(*x.shape[:-2], INPUT_SIZE)


def cost_input(spec: LoopNestSpec, schedule: Schedule) -> np.ndarray:
    """Cost-model input: the compute nest's rows of the state (no cursor, no write-back), log-scaled."""
    rows = observation(spec, AgentState(Schedule(schedule.compute, ())), max_loops=MAX_LOOPS)
    rows[:, 0] = 0.0
    return network_input(rows)


def mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class QNetwork(nn.Module):
    """State (200) -> one Q-value per action, fully connected with ReLU. Actions: the published 7 (env.py),
    or tile actions (tile_actions.py: one per template, a one-step episode from the base schedule)."""

    def __init__(self, hidden: list[int], actions: tuple[str, ...] | list[str] = ACTIONS):
        super().__init__()
        self.hidden = list(hidden)
        self.actions = tuple(actions)
        self.net = mlp([INPUT_SIZE, *hidden, len(self.actions)])

    @property
    def tile_actions(self) -> bool:
        return self.actions != ACTIONS

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CostModel(nn.Module):
    """Compute-nest features (200) -> log(GFLOPS)."""

    def __init__(self, hidden: list[int]):
        super().__init__()
        self.hidden = list(hidden)
        self.net = mlp([INPUT_SIZE, *hidden, 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    @torch.no_grad()
    def predict_gflops(self, features: np.ndarray) -> np.ndarray:
        return np.exp(self(torch.as_tensor(features, dtype=torch.float32)).numpy())


def action_mask(state: AgentState) -> np.ndarray:
    allowed = set(available_actions(state))
    return np.array([a in allowed for a in ACTIONS], dtype=bool)


def greedy_action(q_values: np.ndarray, mask: np.ndarray) -> int | None:
    """Index of the best available action (first on ties), None when nothing is available."""
    if not mask.any():
        return None
    return int(np.argmax(np.where(mask, q_values, -np.inf)))


@dataclass
class Rollout:
    """The states a greedy rollout visited (base first) and the actions that led there."""

    states: list[AgentState]
    actions: list[str] = field(default_factory=list)

    @property
    def final(self) -> AgentState:
        return self.states[-1]


@torch.no_grad()
def rollout(
    network: QNetwork,
    spec: LoopNestSpec,
    steps: int = EPISODE_STEPS,
    start: AgentState | None = None,
    target: Target | None = None,
) -> Rollout:
    """`steps` greedy policy steps from `start` (the base schedule); stops early if no action is available.
    A tile Q-network takes one step: the template of highest Q-value that fits the host (`target`)."""
    state = start or AgentState(Schedule.base(spec))
    result = Rollout([state])
    if network.tile_actions:
        target = target or host_target()
        q_values = network(torch.from_numpy(network_input(observation(spec, state)))).numpy()
        choice = greedy_action(q_values, tile_mask(network.actions, target))
        if choice is not None:
            result.states.append(AgentState(apply_tile(spec, network.actions[choice], target)))
            result.actions.append(network.actions[choice])
        return result
    for _ in range(steps):
        q_values = network(torch.from_numpy(network_input(observation(spec, state)))).numpy()
        choice = greedy_action(q_values, action_mask(state))
        if choice is None:
            break
        state = apply_action(state, ACTIONS[choice])  # type: ignore[assignment]
        result.states.append(state)
        result.actions.append(ACTIONS[choice])
    return result


def polish(evaluator: Evaluator, visited: Rollout) -> tuple[int, float]:
    """(step, GFLOPS) of the fastest schedule on the rollout, measured through the evaluator cache."""
    best_step, best_gflops = 0, -1.0
    for step, state in enumerate(visited.states):
        gflops = evaluator.gflops(state.schedule)
        if gflops > best_gflops:
            best_step, best_gflops = step, gflops
    return best_step, best_gflops


@dataclass
class PolicyBundle:
    network: QNetwork
    meta: dict
    cost_model: CostModel | None = None

    def predicted_gflops(self, spec: LoopNestSpec, schedule: Schedule) -> float | None:
        if self.cost_model is None:
            return None
        return float(self.cost_model.predict_gflops(cost_input(spec, schedule)[None])[0])


def save_bundle(
    folder: Path,
    network: QNetwork,
    meta: dict,
    cost_model: CostModel | None = None,
    cost_meta: dict | None = None,
    name: str = "policy",
) -> None:
    """`<name>.pt` and `<name>.json` (and the cost model, if given) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().cpu().half() for k, v in network.state_dict().items()}, folder / f"{name}.pt")
    full_meta = {
        **meta,
        "hidden": network.hidden,
        "actions": list(network.actions),
        "features": FEATURE_VERSION,
    }
    (folder / f"{name}.json").write_text(json.dumps(full_meta, indent=1) + "\n")
    if cost_model is not None:
        torch.save(
            {k: v.detach().cpu().half() for k, v in cost_model.state_dict().items()}, folder / "cost_model.pt"
        )
        body = {**(cost_meta or {}), "hidden": cost_model.hidden, "features": FEATURE_VERSION}
        (folder / "cost_model.json").write_text(json.dumps(body, indent=1) + "\n")


def _load_module(weights: Path, meta_path: Path, cls: type[nn.Module]) -> tuple[nn.Module, dict]:
    if not weights.is_file() or not meta_path.is_file():
        raise PolicyError(f"no LoopTune model at {weights} (with {meta_path.name} beside it)")
    meta = json.loads(meta_path.read_text())
    if meta.get("features") != FEATURE_VERSION:
        raise PolicyError(f"{meta_path} uses features {meta.get('features')!r}, expected {FEATURE_VERSION!r}")
    if cls is QNetwork:
        actions = meta.get("actions")
        try:
            known = actions == list(ACTIONS) or is_tile_action_space(actions or [])
        except ValueError as error:
            raise PolicyError(f"{meta_path}: {error}") from error
        if not known:
            raise PolicyError(
                f"{weights} was trained for actions {actions}, not {list(ACTIONS)} nor tile actions"
            )
        module = QNetwork(meta["hidden"], actions)
    else:
        module = cls(meta["hidden"])
    state = torch.load(weights, map_location="cpu", weights_only=True)
    module.load_state_dict({k: v.float() for k, v in state.items()})
    module.eval()
    return module, meta


@functools.cache
def load_bundle(policy_path: str | Path) -> PolicyBundle:
    """Load `policy.pt` + `policy.json` (and the cost model beside them, if present); cached per path."""
    path = Path(policy_path)
    network, meta = _load_module(path, path.with_suffix(".json"), QNetwork)
    cost_model = None
    if (path.parent / "cost_model.pt").is_file():
        cost_model, _ = _load_module(
            path.parent / "cost_model.pt", path.parent / "cost_model.json", CostModel
        )
    return PolicyBundle(network, meta, cost_model)  # type: ignore[arg-type]


def warm(policy_path: str | Path) -> None:
    """Load the policy at `policy_path` and run it once on a small matmul, so that torch's import (about a
    second in a fresh process) and its first forward pass are paid here rather than inside a decision's time
    budget (search.py `prepare`)."""
    from optserve.config import LoopTuneSettings

    bundle = load_bundle(str(policy_path))
    spec = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 16, "k": 16, "n": 16}, LoopTuneSettings())
    rollout(bundle.network, spec, target=host_target())


def default_policy_path() -> Path:
    from optserve.config import LoopTuneSettings

    return LoopTuneSettings().policy_path


def decision_policy_path() -> Path:
    """The network of the quick decision (policies/tiles.py): `looptune.decision_policy_path`, by default
    the 10-step policy of `policy`/`policy_polish` (the tile Q-network did not beat it in the measured run
    that decides, docs/bench/looptune.md)."""
    from optserve.config import LoopTuneSettings

    return LoopTuneSettings().decision_policy_path or default_policy_path()


def policy_search(
    evaluator: Evaluator, root: AgentState, with_polish: bool, policy_path: str | Path | None = None
) -> SearchOutcome:
    """The policy as a search method: its final state (not measured), or with polish the fastest visited."""
    bundle = load_bundle(str(policy_path or default_policy_path()))
    visited = rollout(bundle.network, evaluator.spec, start=root)
    if not with_polish:
        return SearchOutcome(visited.final, tuple(visited.actions), None)
    step, gflops = polish(evaluator, visited)
    return SearchOutcome(visited.states[step], tuple(visited.actions[:step]), gflops)
