"""Schedule templates: action sequences from the base schedule that fit many shapes.

The fast schedules of different matmuls share a few structures (loop order plus split factors, e.g.
`k k4 m k16 n`: reduction blocked by 64, rows, a 16-deep unrolled reduction, a vectorized row). A template is
the shortest action sequence that builds one structure; played on any shape it builds that structure (or
stops where an action is unavailable there). Measuring every template on every training shape gives exact,
measured returns for a tree of episodes, which is what the policy learns from (looptune_training/train.py).

Candidates (`candidate_pool`): every structure with at most `max_splits` splits and a vectorizable
innermost loop reachable in 10 steps, plus the structures that came within 5% of a shape's best in an
earlier measured collection. `greedy_cover` keeps the few that together come closest to every shape's best.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from optserve.kernels.schedule import Loop, Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.policies.env import EPISODE_STEPS, AgentState, apply_action, available_actions

REFERENCE_SIZE = 256  # structures are enumerated on a 256^3 matmul, where every split of the set is legal


def structure(compute: tuple[Loop, ...]) -> str:
    """Loop order and split factors, without the sizes that depend on the shape: `k k4 m k16 n`."""
    seen: set[str] = set()
    words = []
    for loop in compute:
        words.append(loop.index if loop.index not in seen else f"{loop.index}{loop.size}")
        seen.add(loop.index)
    return " ".join(words)


def nest_text(schedule: Schedule) -> str:
    """The compute nest as `index:size:tail;...`, outermost first (the measured-data files' key)."""
    return ";".join(f"{lp.index}:{lp.size}:{lp.tail}" for lp in schedule.compute)


def nest_structure(text: str) -> str:
    """`structure` of a compute nest written `index:size:tail;...` (looptune_training/collect.py)."""
    return structure(tuple(Loop(i, int(s), int(t)) for i, s, t in (p.split(":") for p in text.split(";"))))


def reachable_structures(spec: LoopNestSpec, depth: int = EPISODE_STEPS) -> dict[str, tuple[str, ...]]:
    """Every compute-nest structure reachable within `depth` available actions, with its shortest sequence."""
    root = AgentState(Schedule.base(spec))
    seen = {(root.schedule, root.cursor)}
    frontier: list[tuple[AgentState, tuple[str, ...]]] = [(root, ())]
    found: dict[str, tuple[str, ...]] = {structure(root.schedule.compute): ()}
    for _ in range(depth):
        following = []
        for state, actions in frontier:
            for action in available_actions(state):
                after = apply_action(state, action)
                key = (after.schedule, after.cursor)  # type: ignore[union-attr]
                if key in seen:
                    continue
                seen.add(key)
                following.append((after, (*actions, action)))
                found.setdefault(structure(after.schedule.compute), (*actions, action))  # type: ignore[union-attr]
        frontier = following
    return found


def candidate_pool(
    reachable: dict[str, tuple[str, ...]],
    vector_index: str,
    measured_shapes: list[dict] | None = None,
    max_splits: int = 2,
    from_data: int = 300,
) -> list[tuple[str, ...]]:
    """Action sequences of the candidate structures (see the module docstring), in a fixed order."""
    vectorizable = {s: a for s, a in reachable.items() if s.split()[-1].rstrip("0123456789") == vector_index}
    picked = [s for s in vectorizable if len(s.split()) - 3 <= max_splits]
    if measured_shapes:
        near_best: Counter[str] = Counter()
        for record in measured_shapes:
            best = max(g for _, g in record["nests"])
            near_best.update({nest_structure(t) for t, g in record["nests"] if g >= 0.95 * best})
        ranked = [s for s, _ in near_best.most_common() if s in vectorizable and s not in picked]
        picked += ranked[:from_data]
    return [vectorizable[s] for s in sorted(set(picked), key=lambda s: (len(s), s))]


def play(spec: LoopNestSpec, actions: tuple[str, ...] | list[str]) -> list[AgentState] | None:
    """The states a sequence visits from the base schedule, or None if an action is unavailable on the way."""
    states = [AgentState(Schedule.base(spec))]
    for action in actions:
        if action not in available_actions(states[-1]):
            return None
        states.append(apply_action(states[-1], action))  # type: ignore[arg-type]
    return states


def padded(actions: tuple[str, ...] | list[str], final: AgentState, steps: int = EPISODE_STEPS) -> list[str]:
    """The sequence filled up to `steps` with cursor moves (up/down), which leave the schedule as it is."""
    out = list(actions)
    cursor, last = final.cursor, len(final.schedule.loops) - 1
    while len(out) < steps:
        move = "up" if cursor > 0 and (not out or out[-1] != "up" or cursor == last) else "down"
        cursor += -1 if move == "up" else 1
        out.append(move)
    return out


def greedy_cover(log_gflops: np.ndarray, count: int) -> list[int]:
    """Rows (templates) of a templates x shapes matrix of log GFLOPS (-inf: invalid) that maximize the mean
    over shapes of the best chosen row, picked greedily."""
    chosen: list[int] = []
    best = np.full(log_gflops.shape[1], -math.inf)
    floor = np.nanmin(np.where(np.isfinite(log_gflops), log_gflops, np.nan))
    for _ in range(min(count, log_gflops.shape[0])):
        gains = np.maximum(log_gflops, best[None]).clip(min=floor).mean(axis=1)
        gains[chosen] = -math.inf
        pick = int(np.argmax(gains))
        chosen.append(pick)
        best = np.maximum(best, log_gflops[pick])
    return chosen


def choose_cover(gflops: np.ndarray, count: int) -> list[int]:
    """Rows (tile templates, policies/tiles.py) of a templates x shapes GFLOPS matrix (0: refused) whose best,
    per shape, comes closest to the shape's best, picked greedily; each shape weighs the same (log of the
    fraction of best)."""
    with np.errstate(divide="ignore"):
        fraction = np.log(gflops / gflops.max(axis=0, keepdims=True))
    return greedy_cover(fraction, count)
