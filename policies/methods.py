"""The names of LoopTune's ways to choose a schedule; `policies/search.py`'s `SEARCHES` runs each.

A module of names alone, so a command line can offer them without importing the searches (llvmlite, numpy).
"""

from __future__ import annotations

from enum import StrEnum


class SearchMethod(StrEnum):
    BASE = "base"  # the base schedule, no search
    GREEDY1 = "greedy1"  # greedy with lookahead 1, 2
    GREEDY2 = "greedy2"
    BEAM2DFS = "beam2dfs"  # beam search, width 2 or 4, depth- or breadth-first
    BEAM4DFS = "beam4dfs"
    BEAM2BFS = "beam2bfs"
    BEAM4BFS = "beam4bfs"
    RANDOM = "random"
    POLICY = "policy"  # the bundled Q-policy's rollout
    POLICY_POLISH = "policy_polish"  # the rollout, then a short greedy polish
    TILES = "tiles"  # the whole pool of tile templates
    POLICY_TILES = "policy_tiles"  # the learned cover of tile templates + the Q-policy (service default)


# The searches without a learned model: LoopTune's baselines (thesis §3.7).
BASELINE_SEARCHES = (
    SearchMethod.GREEDY1,
    SearchMethod.GREEDY2,
    SearchMethod.BEAM2DFS,
    SearchMethod.BEAM4DFS,
    SearchMethod.BEAM2BFS,
    SearchMethod.BEAM4BFS,
    SearchMethod.RANDOM,
)
# Decisions under a second: short timing, polish budget (settings).
QUICK_METHODS = (SearchMethod.POLICY_TILES,)
# What a Schedule request or `optserve schedule-local` that names no method gets: the learned tile cover and
# the Q-policy, within the polish budget.
DEFAULT_METHOD = SearchMethod.POLICY_TILES
