"""Search baselines over the LoopTune environment (thesis §3.7), ranked by measured GFLOPS.

All searches walk action sequences of at most 10 steps from the base schedule, consider only available
actions, evaluate every state they reach through the shared `Evaluator` cache, keep the best state seen,
and stop at their time limit. (The published baselines sorted beam candidates by action name; these rank
them by GFLOPS, as the text describes.)
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from optserve.kernels.schedule import Schedule
from optserve.policies import clock
from optserve.policies.env import (
    EPISODE_STEPS,
    AgentState,
    Evaluator,
    SearchOutcome,
    apply_action,
    available_actions,
)
from optserve.policies.methods import SearchMethod


@dataclass
class _Search:
    evaluator: Evaluator
    deadline: float
    steps: int = EPISODE_STEPS
    best: SearchOutcome | None = None
    timed_out: bool = False
    expanded: set = field(default_factory=set)

    def expired(self) -> bool:
        if clock.now() >= self.deadline:
            self.timed_out = True
        return self.timed_out

    def score(self, state: AgentState, actions: tuple[str, ...]) -> float:
        gflops = self.evaluator.gflops(state.schedule)
        if self.best is None or gflops > self.best.gflops:
            self.best = SearchOutcome(state, actions, gflops)
        return gflops

    def children(self, state: AgentState, actions: tuple[str, ...]) -> list[tuple[float, str, AgentState]]:
        """Available successors, best GFLOPS first (ties keep the action order); stops at the deadline."""
        scored = []
        for action in available_actions(state):
            if self.expired():
                break
            after = apply_action(state, action)
            scored.append((self.score(after, (*actions, action)), action, after))
        scored.sort(key=lambda item: -item[0])
        return scored


def greedy(evaluator: Evaluator, root: AgentState, lookahead: int, deadline: float) -> SearchOutcome:
    """Take the first action of the best sequence of <= `lookahead` actions; stop when none improves."""
    search = _Search(evaluator, deadline)
    state, actions = root, ()
    current = search.score(root, ())
    for _ in range(search.steps):
        best_value, best_first = current, None
        frontier = [(state, None, actions)]
        for _depth in range(lookahead):
            nxt = []
            for node, first, path in frontier:
                for value, action, after in search.children(node, path):
                    head = first or action
                    if value > best_value:
                        best_value, best_first = value, head
                    nxt.append((after, head, (*path, action)))
            frontier = nxt
        if best_first is None or search.expired():
            break
        state = apply_action(state, best_first)
        actions = (*actions, best_first)
        current = search.score(state, actions)
    return _finish(search)


def beam_dfs(evaluator: Evaluator, root: AgentState, width: int, deadline: float) -> SearchOutcome:
    """Depth-first: expand the `width` best children of every state, down to 10 steps."""
    search = _Search(evaluator, deadline)
    search.score(root, ())

    def expand(state: AgentState, actions: tuple[str, ...]) -> None:
        if len(actions) >= search.steps or search.expired():
            return
        key = (state.schedule.key(), state.cursor, len(actions))
        if key in search.expanded:
            return
        search.expanded.add(key)
        for _value, action, after in search.children(state, actions)[:width]:
            expand(after, (*actions, action))

    expand(root, ())
    return _finish(search)


def beam_bfs(evaluator: Evaluator, root: AgentState, width: int, deadline: float) -> SearchOutcome:
    """Breadth-first: each level keeps the `width` best children of every state of the level above."""
    search = _Search(evaluator, deadline)
    search.score(root, ())
    level = [(root, ())]
    for _depth in range(search.steps):
        nxt, seen = [], set()
        for state, actions in level:
            for _value, action, after in search.children(state, actions)[:width]:
                key = (after.schedule.key(), after.cursor)
                if key not in seen:
                    seen.add(key)
                    nxt.append((after, (*actions, action)))
            if search.expired():
                return _finish(search)
        level = nxt
    return _finish(search)


def random_search(evaluator: Evaluator, root: AgentState, deadline: float, seed: int = 0) -> SearchOutcome:
    """Random 10-step walks over available actions until the deadline; every visited state is measured."""
    search = _Search(evaluator, deadline)
    search.score(root, ())
    rng = random.Random(seed)
    while not search.expired():
        state, actions = root, ()
        for _ in range(search.steps):
            choices = available_actions(state)
            if not choices or search.expired():
                break
            action = rng.choice(choices)
            state = apply_action(state, action)
            actions = (*actions, action)
            search.score(state, actions)
    return _finish(search)


def _finish(search: _Search) -> SearchOutcome:
    assert search.best is not None
    search.best.timed_out = search.timed_out
    return search.best


SearchFn = Callable[[Evaluator, AgentState, float], SearchOutcome]

SEARCHES: dict[SearchMethod, SearchFn] = {
    SearchMethod.BASE: lambda ev, root, deadline: SearchOutcome(root, (), ev.gflops(root.schedule)),
    SearchMethod.GREEDY1: lambda ev, root, deadline: greedy(ev, root, 1, deadline),
    SearchMethod.GREEDY2: lambda ev, root, deadline: greedy(ev, root, 2, deadline),
    SearchMethod.BEAM2DFS: lambda ev, root, deadline: beam_dfs(ev, root, 2, deadline),
    SearchMethod.BEAM4DFS: lambda ev, root, deadline: beam_dfs(ev, root, 4, deadline),
    SearchMethod.BEAM2BFS: lambda ev, root, deadline: beam_bfs(ev, root, 2, deadline),
    SearchMethod.BEAM4BFS: lambda ev, root, deadline: beam_bfs(ev, root, 4, deadline),
    SearchMethod.RANDOM: lambda ev, root, deadline: random_search(ev, root, deadline),
    SearchMethod.POLICY: lambda ev, root, deadline: _policy(ev, root, with_polish=False),
    SearchMethod.POLICY_POLISH: lambda ev, root, deadline: _policy(ev, root, with_polish=True),
    SearchMethod.TILES: lambda ev, root, deadline: _tiles(ev, root, deadline, with_policy=False),
    SearchMethod.POLICY_TILES: lambda ev, root, deadline: _tiles(ev, root, deadline, with_policy=True),
}


def _policy(evaluator: Evaluator, root: AgentState, with_polish: bool) -> SearchOutcome:
    """The bundled LoopTune policy (policies/policy.py; torch is imported only when it is asked for)."""
    from optserve.policies.policy import policy_search

    return policy_search(evaluator, root, with_polish)


def _tiles(evaluator: Evaluator, root: AgentState, deadline: float, with_policy: bool) -> SearchOutcome:
    """Tiled schedules (policies/tiles.py): the whole pool, or the learned cover with the Q-policy."""
    from optserve.policies.tiles import policy_tiles, tiles_search

    return (policy_tiles if with_policy else tiles_search)(evaluator, root, deadline)


@functools.cache
def prepare(method: str) -> None:
    """Load, once per process, what `method` needs before its time budget starts: the JIT's target and the
    kernels' native team for every method; the tile cover for the tile methods; the network (torch) for the
    policy methods, run once. In a fresh process the torch import alone (about 1.2 s on 2 busy cores) used
    up the quick decision's 0.5 s budget, which then timed a single candidate and kept it (a 512^3 matmul
    at 1 thread: 1 candidate timed, 104 GFLOPS; prepared, 9-10 timed, 113)."""
    from optserve.kernels import team
    from optserve.kernels.jit import host_target

    host_target()
    team.native_available()
    if method in (SearchMethod.TILES, SearchMethod.POLICY_TILES):
        from optserve.policies.tiles import load_cover

        load_cover()
    if method in (SearchMethod.POLICY, SearchMethod.POLICY_POLISH, SearchMethod.POLICY_TILES):
        from optserve.policies.policy import decision_policy_path, default_policy_path, warm

        warm(decision_policy_path() if method == SearchMethod.POLICY_TILES else default_policy_path())


def run_search(method: str, evaluator: Evaluator, time_limit_s: float) -> SearchOutcome:
    if method not in SEARCHES:
        raise ValueError(f"unknown search {method!r}; choose from {', '.join(SEARCHES)}")
    root = AgentState(Schedule.base(evaluator.spec))
    return SEARCHES[method](evaluator, root, clock.now() + time_limit_s)
