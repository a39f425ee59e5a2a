"""Decide on a sub-problem, answer for the whole: what keeps a decision's cost independent of the FLOPs.

Timing a candidate costs at least one call of its kernel; at 2048^3 one call is 17 GFLOP (a fifth of a
second on a core at its best, seconds for a scalar base), so a search that times candidates on the whole
contraction either runs past its deadline or has to refuse the size. Instead, a contraction of more than
`timed_flops` a thread (policies/scheduler.py asks `timed_spec` for `timed_flops` x threads and times the
candidates on those threads) is decided on a representative sub-problem (`timed_spec`: the largest sizes
halved, one at a time, until it has at most that many; the same indices, tensors and kinds of reuse; a nest
with one reduction keeps that reduction whole, `deep_reduction`), and the
decision's actions are replayed on the whole contraction (`replay`): a tile action builds its template
there (the same register tile, its cache blocks at most the sub-problem's sizes: the whole runs as
blocks of what was timed), and the
environment's moves and splits apply to the whole contraction's base schedule as they did to the
sub-problem's (every split legal there is legal on the larger sizes).
"""

from __future__ import annotations

import dataclasses
import math

from optserve.kernels.codegen import Target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, roles, tiled_schedule
from optserve.policies.env import AgentState, apply_action
from optserve.policies.tile_actions import TILE_ACTION, apply_tile, template_of

ALIGN = 16  # halved sizes above 2 * ALIGN are rounded up to a multiple of this (the widest vector)
# output sizes down to which a nest with one reduction is cut before its reduction is (deep_reduction)
DEEP_OUTPUT = 128


def deep_reduction(spec: LoopNestSpec) -> str | None:
    """The reduction index a sub-problem of `spec` keeps whole: the only one, where the nest has a single
    reduction (the matmul kinds; a convolution's window and channels are cut as before). A tile's cache
    blocks are blocks of that index, so the sub-problem runs them at the whole's depth: on the lent Xeon at
    2048^3, timed on 512^3 (k cut to 512) the unblocked 12x1 tile led (110-143 GFLOPS) and ran at 0.63-0.67x
    numpy on the whole, while timed on 256 x 2048 x 256 it came last of the wide tiles (102-110 against
    135-142), whose best there ran at 0.85-1.00x on the whole (benchmarks/looptune_subproblem_probe.py)."""
    reductions = [i for i in spec.size_of if i not in spec.output_indices]
    return reductions[0] if len(reductions) == 1 else None


def timed_spec(spec: LoopNestSpec, max_flops: int) -> LoopNestSpec:
    """`spec` itself when its FLOPs are at most `max_flops`; else the same contraction with its largest
    sizes halved (rounded up to ALIGN where they stay above it) until they are: with one reduction
    (`deep_reduction`), the output indices first, while one is above DEEP_OUTPUT."""
    if spec.flops <= max_flops:
        return spec
    sizes = dict(spec.sizes)
    deep = deep_reduction(spec)
    while 2 * math.prod(sizes.values()) > max_flops:
        index = max(sizes, key=lambda i: sizes[i])
        if deep is not None:
            outputs = [i for i in sizes if i != deep]
            widest = max(outputs, key=lambda i: sizes[i])
            if sizes[widest] > DEEP_OUTPUT or sizes[deep] == 1:
                index = widest
        if sizes[index] == 1:
            break
        half = -(-sizes[index] // 2)
        sizes[index] = -(-half // ALIGN) * ALIGN if half > 2 * ALIGN else half
    return LoopNestSpec(output=spec.output, inputs=spec.inputs, sizes=tuple(sizes.items()))


def replay(
    spec: LoopNestSpec,
    actions: tuple[str, ...] | list[str],
    target: Target,
    timed: LoopNestSpec | None = None,
) -> Schedule:
    """The schedule `actions` (a decision on another size of the same contraction, `timed`) build on `spec`:
    a tile action's template with its cache blocks at most the timed sizes (`blocks_within`), or the
    environment's actions from the base schedule (an action that cannot apply to these sizes is skipped)."""
    if actions and actions[0].startswith(TILE_ACTION):
        if timed is None or timed == spec:
            return apply_tile(spec, actions[0], target)
        width = target.vector_widths[0] if target.vector_widths else 1
        return tiled_schedule(spec, blocks_within(template_of(actions[0]), timed), width)
    state = AgentState(Schedule.base(spec))
    for action in actions:
        state = apply_action(state, action) or state
    return state.schedule


def blocks_within(template: TileTemplate, timed: LoopNestSpec) -> TileTemplate:
    """`template` with every cache block no larger than what the timed sub-problem had of its index: a
    template without blocks won on a sub-problem that fits the caches, and on the whole contraction it runs
    as blocks of that size, the timed kernel's working set (unblocked, a 2048^3 matmul streams the whole of
    B per register tile row: 0.7x what it does blocked)."""
    role = roles(timed, template.pack)
    size = timed.size_of

    def within(block: int | None, index: str | None) -> int | None:
        if index is None:
            return block
        return size[index] if block is None or block > size[index] else block

    rows = role.rows[0] if role.rows else None
    return dataclasses.replace(
        template,
        k_block=within(template.k_block, role.reduction),
        v_block=within(template.v_block, role.vector),
        r_block=within(template.r_block, rows),
    )
