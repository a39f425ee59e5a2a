"""The LoopTune environment (thesis §3.6): an agent with a cursor edits a loop schedule.

Actions (published semantics, loop_tool branch loop_tune):
- up / down: move the cursor to the previous / next loop in pre-order (compute nest, then write-back nest).
- swap_up / swap_down: exchange the cursor's loop with its neighbour in the same nest; the cursor follows
  the loop. Two loops over the same index keep their order (the swap is a no-op) but the cursor still moves.
- split_4 / split_8 / split_16: loop {size, tail} covering `size * e + tail` elements (e = one iteration)
  becomes outer {total // (s*e), total % (s*e)} over inner {s, 0}; illegal when size < s.
An action is available only if legal, the compute nest's innermost loop then has size 1 or a multiple of 8
(the vector width), and there are at most 10 loops. Unavailable actions are no-ops.

State: 10 loops x 20 features, zero-padded: cursor bit, size, tail, compute (1) / write-back (0) bit, and a
16-bin histogram of ceil(log2(stride)) over the tensor accesses of the loop, each weighted by how often the
loop steps (normalized per loop, zero strides counted in the total but in no bin).
Reward: (GFLOPS(s') - GFLOPS(s)) / peak GFLOPS; GFLOPS cached per compute-nest hash. Episodes: 10 steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from optserve.kernels.schedule import Loop, Schedule, iteration_extents, split_loop
from optserve.kernels.spec import LoopNestSpec, SpecError

ACTIONS = ("up", "down", "swap_up", "swap_down", "split_4", "split_8", "split_16")
MAX_LOOPS = 10
LOOP_FEATURES = 20
STRIDE_BINS = 16
EPISODE_STEPS = 10
VECTOR_WIDTH = 8


@dataclass(frozen=True)
class AgentState:
    schedule: Schedule
    cursor: int = 0


@dataclass
class SearchOutcome:
    """Where a walk of the environment ended: what a search, the tile methods or a policy answers (its chosen
    state, the actions to it, and what was measured)."""

    state: AgentState
    actions: tuple[str, ...]
    gflops: float | None  # None for a method that chose without measuring (a policy)
    timed_out: bool = False


def apply_action(state: AgentState, action: str) -> AgentState | None:
    """The state after `action`, or None when the action is illegal here."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; actions are {', '.join(ACTIONS)}")
    schedule, cursor = state.schedule, state.cursor
    loops = schedule.loops
    n_compute = len(schedule.compute)
    in_compute = cursor < n_compute
    first, last = (0, n_compute - 1) if in_compute else (n_compute, len(loops) - 1)
    if action == "up":
        return replace(state, cursor=cursor - 1) if cursor > 0 else None
    if action == "down":
        return replace(state, cursor=cursor + 1) if cursor < len(loops) - 1 else None
    if action in ("swap_up", "swap_down"):
        other = cursor - 1 if action == "swap_up" else cursor + 1
        if not first <= other <= last:
            return None
        new = list(loops)
        if new[cursor].index != new[other].index:
            new[cursor], new[other] = new[other], new[cursor]
        return AgentState(_rebuild(new, n_compute), other)
    factor = int(action.removeprefix("split_"))
    if loops[cursor].size < factor:
        return None
    if in_compute:
        return AgentState(Schedule(split_loop(schedule.compute, cursor, factor), schedule.writeback), cursor)
    writeback = split_loop(schedule.writeback, cursor - n_compute, factor)
    return AgentState(Schedule(schedule.compute, writeback), cursor)


def available_actions(state: AgentState, max_loops: int = MAX_LOOPS) -> list[str]:
    """Legal actions that keep the innermost compute loop vectorizable and the loop count bounded."""
    available = []
    for action in ACTIONS:
        after = apply_action(state, action)
        if after is None or len(after.schedule.loops) > max_loops:
            continue
        innermost = after.schedule.compute[-1].size
        if innermost == 1 or innermost % VECTOR_WIDTH == 0:
            available.append(action)
    return available


def observation(spec: LoopNestSpec, state: AgentState, max_loops: int = MAX_LOOPS) -> np.ndarray:
    """The 10 x 20 state vector (float32)."""
    features = np.zeros((max_loops, LOOP_FEATURES), dtype=np.float32)
    out_strides = spec.strides(spec.output)
    compute_tensors = [spec.strides(t) for t in spec.inputs] + [out_strides]
    writeback_tensors = [out_strides, out_strides]  # reads the accumulated result, writes the output
    row = 0
    for nest, tensors, is_compute in (
        (state.schedule.compute, compute_tensors, 1.0),
        (state.schedule.writeback, writeback_tensors, 0.0),
    ):
        extents = iteration_extents(nest)
        steps = 1
        for loop, extent in zip(nest, extents, strict=True):
            steps *= loop.size
            if row >= max_loops:
                break
            features[row, :4] = (row == state.cursor, loop.size, loop.tail, is_compute)
            features[row, 4:] = _stride_histogram([extent * t[loop.index] for t in tensors], steps)
            row += 1
    return features


def _stride_histogram(strides: list[int], frequency: int) -> np.ndarray:
    histogram = np.zeros(STRIDE_BINS, dtype=np.float32)
    total = frequency * len(strides)
    for stride in strides:
        if stride > 0:
            bucket = math.ceil(math.log2(stride))
            if bucket < STRIDE_BINS:
                histogram[bucket] += frequency / total
    return histogram


def _rebuild(loops: list[Loop], n_compute: int) -> Schedule:
    return Schedule(compute=tuple(loops[:n_compute]), writeback=tuple(loops[n_compute:]))


@dataclass
class Evaluator:
    """GFLOPS of schedules of one spec, measured once per compute nest (the generated code) and cached.

    A schedule the backend refuses (too much straight-line code) scores 0, as in the published env."""

    spec: LoopNestSpec
    measure_fn: Callable[[LoopNestSpec, Schedule], float]
    cache: dict[str, float] = field(default_factory=dict)
    evaluations: int = 0
    seconds: float = 0.0
    # the contraction the decision is for, where it is larger than one thread's timed share (`spec` is then
    # a sub-problem of it, or itself on several threads; policies/proxy.py)
    whole: LoopNestSpec | None = None
    # times already measured schedules again, interleaved, until a deadline: their GFLOPS (policies/tiles.py
    # `settle_ties`); None: no rematch
    rematch_fn: Callable[[LoopNestSpec, list[Schedule], float], list[float]] | None = None
    threads: int = 1  # threads the candidates run on: the request's (policies/tiles.py `prefer_wide`)

    def rematch(self, schedules: list[Schedule], deadline: float) -> list[float] | None:
        """GFLOPS of `schedules` timed again against each other (`rematch_fn`), written to the cache where
        measured (0: not timed again, the cached value stays); None without a rematch."""
        if self.rematch_fn is None:
            return None
        start = time.perf_counter()
        again = self.rematch_fn(self.spec, schedules, deadline)
        self.seconds += time.perf_counter() - start
        for schedule, gflops in zip(schedules, again, strict=True):
            if gflops:
                self.cache[schedule.compute_key()] = gflops
        return again

    def gflops(self, schedule: Schedule) -> float:
        key = schedule.compute_key()
        if key not in self.cache:
            start = time.perf_counter()
            try:
                self.cache[key] = self.measure_fn(self.spec, schedule)
            except SpecError:
                self.cache[key] = 0.0
            self.seconds += time.perf_counter() - start
            self.evaluations += 1
        return self.cache[key]


class LoopTuneEnv:
    """One episode of schedule edits on one spec; `step` returns (observation, reward, done, info)."""

    def __init__(self, evaluator: Evaluator, peak_gflops: float, episode_steps: int = EPISODE_STEPS):
        self.evaluator = evaluator
        self.spec = evaluator.spec
        self.peak_gflops = peak_gflops
        self.episode_steps = episode_steps
        self.reset()

    def reset(self) -> np.ndarray:
        self.state = AgentState(Schedule.base(self.spec))
        self.steps = 0
        self.actions: list[str] = []
        self.current_gflops = self.evaluator.gflops(self.state.schedule)
        return observation(self.spec, self.state)

    def available_actions(self) -> list[str]:
        return available_actions(self.state)

    def step(self, action: str) -> tuple[np.ndarray, float, bool, dict]:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; actions are {', '.join(ACTIONS)}")
        applied = action in self.available_actions()
        if applied:
            self.state = apply_action(self.state, action)  # type: ignore[assignment]
        gflops = self.evaluator.gflops(self.state.schedule)
        reward = (gflops - self.current_gflops) / self.peak_gflops
        self.current_gflops = gflops
        self.steps += 1
        self.actions.append(action)
        done = self.steps >= self.episode_steps
        info = {"gflops": gflops, "applied": applied, "schedule": self.state.schedule.text()}
        return observation(self.spec, self.state), reward, done, info
