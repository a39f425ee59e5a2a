"""Tile actions: one Q-network action per tile template (`tile:<template>`), for the larger action space.

The published actions (env.py) split by 4/8/16 and stop at 10 loops, so they cannot write the cache-level
tiling of kernels/tiling.py (register tile, L1/L2 blocks, tails). A tile action applies a whole template to
the base schedule, so the Q-network chooses among cache tilings directly: a one-step episode whose return
is the measured GFLOPS of the tiled schedule (looptune_training/tile_q.py fits it). A tile action is
available where the template's register tile fits the target's accumulators (policies/tiles.py `fits`).
"""

from __future__ import annotations

import numpy as np

from optserve.kernels.codegen import Target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, tiled_schedule

TILE_ACTION = "tile:"  # a tiled schedule's "action": the template that built it (not an env action)


def tile_action(template: TileTemplate) -> str:
    return TILE_ACTION + template.name()


def is_tile_action_space(actions: list[str] | tuple[str, ...]) -> bool:
    """Every action applies a template (a tile Q-network), checked by parsing each name."""
    if not actions or not all(a.startswith(TILE_ACTION) for a in actions):
        return False
    for action in actions:
        template_of(action)
    return True


def template_of(action: str) -> TileTemplate:
    """The template of `tile:<name>`; ValueError for a malformed name."""
    name = action.removeprefix(TILE_ACTION)
    try:
        template = TileTemplate.from_name(name)
    except (ValueError, IndexError, KeyError) as error:
        raise ValueError(
            f"{action!r} is not a tile action (tile:<template>, e.g. tile:4x2rv-k128)"
        ) from error
    if template.name() != name:
        raise ValueError(f"{action!r} is not a tile action: its template reads {template.name()!r}")
    return template


def tile_mask(actions: list[str] | tuple[str, ...], target: Target) -> np.ndarray:
    """Which tile actions the target can run (the register tile fits its accumulator registers)."""
    return np.array(
        [(t := template_of(a)).rows * t.vectors <= target.accumulator_registers for a in actions], dtype=bool
    )


def apply_tile(spec: LoopNestSpec, action: str, target: Target) -> Schedule:
    """The schedule a tile action builds on `spec` for the target's widest vector."""
    width = target.vector_widths[0] if target.vector_widths else 1
    return tiled_schedule(spec, template_of(action), width)
