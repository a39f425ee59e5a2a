"""Decide on a sub-problem, answer for the whole: what keeps a decision's cost independent of the FLOPs.

Timing a candidate costs at least one call of its kernel; at 2048^3 one call is 17 GFLOP (a fifth of a
second on a core at its best, seconds for a scalar base), so a search that times candidates on the whole
contraction either runs past its deadline or has to refuse the size. Instead, a contraction of more than
`timed_flops` is decided on a representative sub-problem (`timed_spec`: the largest sizes halved, one at a
time, until it has at most `timed_flops`; the same indices, tensors and kinds of reuse), and the
decision's actions are replayed on the whole contraction (`replay`): a tile action builds its template
there (tile blocks are clamped to the sizes, so the same register tile and cache blocks), and the
environment's moves and splits apply to the whole contraction's base schedule as they did to the
sub-problem's (every split legal there is legal on the larger sizes).
"""

from __future__ import annotations

import math

from optserve.kernels.codegen import Target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.policies.env import AgentState, apply_action
from optserve.policies.tile_actions import TILE_ACTION, apply_tile

ALIGN = 16  # halved sizes above 2 * ALIGN are rounded up to a multiple of this (the widest vector)


def timed_spec(spec: LoopNestSpec, max_flops: int) -> LoopNestSpec:
    """`spec` itself when its FLOPs are at most `max_flops`; else the same contraction with its largest
    sizes halved (rounded up to ALIGN where they stay above it) until they are."""
    if spec.flops <= max_flops:
        return spec
    sizes = dict(spec.sizes)
    while 2 * math.prod(sizes.values()) > max_flops:
        index = max(sizes, key=lambda i: sizes[i])
        if sizes[index] == 1:
            break
        half = -(-sizes[index] // 2)
        sizes[index] = -(-half // ALIGN) * ALIGN if half > 2 * ALIGN else half
    return LoopNestSpec(output=spec.output, inputs=spec.inputs, sizes=tuple(sizes.items()))


def replay(spec: LoopNestSpec, actions: tuple[str, ...] | list[str], target: Target) -> Schedule:
    """The schedule `actions` (a decision on another size of the same contraction) build on `spec`: a tile
    action's template, or the environment's actions from the base schedule (an action that cannot apply
    to these sizes is skipped)."""
    if actions and actions[0].startswith(TILE_ACTION):
        return apply_tile(spec, actions[0], target)
    state = AgentState(Schedule.base(spec))
    for action in actions:
        state = apply_action(state, action) or state
    return state.schedule
