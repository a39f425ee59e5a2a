"""Tiled schedules as a search space: the template pool, the learned cover, and the two methods over them.

The pool is a fixed-seed sample of the tile templates of kernels/tiling.py (register tile mr x nv vectors,
reduction / vector / row cache blocks, tile-loop order). Which templates to try first is learned from
measurements: every pool template is timed on every shape of the training suite
(benchmarks/looptune_tiles.py), and `choose_cover` keeps the few that together come closest to each
training shape's best (the templates' greedy cover, as for the action templates). The cover is bundled as
`models/looptune/tiles.json`.

- `tiles`: measure the whole pool, cover first, until the time limit (the search over the tile space).
- `policy_tiles`: the Q-policy's final schedule and the cover's templates, measured within the polish
  budget (cover first), the fastest kept: the service's default decision.

Where the backend may pack an operand (kernels/packing.py: A·B^T-like kinds, B; A^T·B and A^T·B^T, A read
`A[k,m]`), every template comes in two layouts: packed (the template as bundled) and unpacked (`-u`:
partial sums along the contiguous reduction index for A·B^T, A read in place for A^T·B). Both methods
measure both, so the faster layout is kept; for every other kind the twin is the same nest and is not
measured again. The quick decision may not reach the layout it measures second, so it measures the packed
ones first only where each element packed by choice is read at least PACK_REUSE times (A·B^T: m >= 32;
A^T·B: n >= 32); below that the copy costs about what it saves (A·B^T 16 x 2048 x 48 here: 51 GFLOPS
packed, 88 unpacked; 32 x 256 x 256: 96 both ways; 100^3: 87 packed, 66 unpacked).

A contraction decided on a sub-problem with its reduction whole (policies/proxy.py `deep_reduction`: the
matmul kinds above 512^3) measures the WIDE_TILES first: 6x4 register tiles (4 vectors, 24 accumulators)
with reduction blocks of 512 and 256, which the cover (learned on shapes up to ~450 wide) lacks. On
the lent Xeon at 2048^3 they ran at 0.82-1.00x numpy where the cover's best reached 0.78-0.89x and the
12x1 tile its 512^3 sub-problem chose 0.63-0.67x (benchmarks/looptune_tile2048_ab.py and
looptune_subproblem_probe.py): fewer loads per multiply-add (10 per 24 for 6x4, 13 per 12 for 12x1). The
sub-problem understates their lead, so another template replaces the best of them (on one thread the
first, k512) only when it is faster by more than WIDE_MARGIN (`prefer_wide`), and on one thread only another
wide tile does, where the whole holds the first whole (WIDE_WHOLE).

The quick decision keeps TIE_SHARE of its budget to time its near ties again, interleaved (`settle_ties`):
one quick timing of each candidate left single decisions to the noise of one run.

Both measure the base schedule last, as the fallback: it is often scalar, and on a large contraction one
timing of it costs more than measuring the whole cover, so measured first it would use up the budget.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from pathlib import Path

from optserve.kernels.codegen import Target
from optserve.kernels.jit import host_target
from optserve.kernels.packing import channel_vector, packed_reuse
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, channels_last_first, roles, tiled_schedule
from optserve.policies import clock
from optserve.policies.env import AgentState, Evaluator, SearchOutcome
from optserve.policies.proxy import deep_reduction
from optserve.policies.tile_actions import TILE_ACTION, tile_action

POOL_SIZE = 150
POOL_SEED = 0
COVER_SIZE = 8
PACK_REUSE = 32  # reads of each packed element from which the decision measures the packed layout first
# image rows from which an NCHW convolution's decision measures the row vectorized before the channels
# (224: 89 vs 70 GFLOPS here; 28: 18 vs 88, its row is 16 + 8 + 4 floats)
CHANNEL_ROW = 64
# image rows below which it measures every cover template on channels before any on the image row (a row
# of 7, 14 or 28 fills at most one 16-float vector and tails: on the lent Xeon the row twins lost on every
# such layer, and interleaved they took half a decision's budget: resnet conv4 1x1 reduce never reached
# the cover's last template, 8x2 at 100 GFLOPS here against 2x3's 51)
CHANNEL_ONLY_ROW = 32
# kept over a faster other template unless that one is faster by more than this: on the deep sub-problem
# (256 x 2048 x 256, outputs cut to 256 wide) the best wide tile led the cover's best by 3-11 % where on the
# whole 2048^3 it led by 14-29 % (lent Xeon, 4 matmul kinds, benchmarks/looptune_subproblem_probe.py), and
# single quick timings there picked 4x4rv-k64-r64 in 4 of 8 decisions (0.59-0.93x numpy on the whole)
WIDE_MARGIN = 1.1
# on one thread a tile outside WIDE_TILES does not replace the first of them on a deep sub-problem where the
# whole holds that tile whole (its vectorized and row indices at least this long): the sub-problem keeps C
# small (256 x 256 for 2048^3, in L2) where the whole's C (16 MiB) goes to memory, and a tile with short
# reduction blocks reloads it per block, 32 times for 4x4rv-k64-r64 at 2048^3. In every lent run such a
# challenger that beat the first wide tile by the margin on the sub-problem lost on the whole (4x4rv-k64-r64
# 0.75-0.84x numpy, 8x2rv-k256 0.85x, where 6x4rv-k512 ran 0.86-1.03x; no tile outside WIDE_TILES ran ahead
# of it on any whole 1000^3 or 2048^3 probed at 1 thread), while here (Zen 4) six tiles ran within 3 % of
# each other at 2048^3 (docs/bench/looptune_all_cores.md)
WIDE_WHOLE = 64
# near ties: the quick decision times again, interleaved, the TIES fastest options measured within TIE_MARGIN
# of the best (`settle_ties`), in the last TIE_SHARE of its budget. One quick timing of each (best of 3)
# swung single decisions between runs: the held-out 512^3 matmul on 16 threads 0.61x numpy in one lent run,
# 1.09x in the next; NCHW vgg conv1_2 at 1 thread 0.52x / 0.91x
TIES = 3
TIE_MARGIN = 1.25
TIE_SHARE = 0.2
# measured first for a large contraction decided on a sub-problem with its reduction whole (module docstring).
# On the whole 2048^3 at 1 thread (lent Xeon, benchmarks/looptune_tile2048_ab.py) 6x4 with reduction blocks
# of 512 beat those of 256 by 2-5 % in each comparison, and 12x2 (no longer here) ran 12-17 % behind 6x4
# where the sub-problem ranked it within the tie margin (A.B^T 2048^3 took it at 0.80-0.84x numpy). On one
# thread the first is kept among them (`prefer_wide`): on the whole 1000^3 and 2048^3 of the four matmul kinds
# it ran ahead of 6x4 with k256 in 10 of 12 interleaved comparisons and level in one (lent Xeon), where the
# sub-problem's quick timings chose k256 or 8x2 in 4 of the 9 large 1-thread decisions of run h (0.91-0.95x
# numpy); on 16 threads the fastest of them as measured (k512 ahead of k256 or level on all four kinds at
# 2048^3 there). 8x2rv-k256 is out: on the whole 2048^3 it ran 8-11 % behind 6x4 at 1 thread and 7-33 % behind
# the faster 6x4 on 16 (0.73-0.79x numpy), and took A^T.B^T 2048^3 at 0.85x in run i
# (docs/bench/looptune_all_cores.md)
WIDE_TILES = (
    TileTemplate(6, 4, k_block=512, v_block=512, r_block=96),
    TileTemplate(6, 4, k_block=256, v_block=512, r_block=96),
)


def template_grid() -> list[TileTemplate]:
    """Every template of the grid: mr x nv (at most 28 accumulators, AVX-512's budget), blocks, orders."""
    grid = []
    for rows in (1, 2, 4, 6, 8, 12, 14):
        for vectors in (1, 2, 3, 4):
            if rows * vectors > 28:
                continue
            for k_block in (None, 4, 16, 64, 128, 256):
                for v_block in (None, 1, 128, 256):  # 1: one register tile wide
                    for r_block in (None, 64, 128):
                        for order in ("rv", "vr"):
                            grid.append(TileTemplate(rows, vectors, k_block, v_block, r_block, order))
    return grid


def template_pool(size: int = POOL_SIZE, seed: int = POOL_SEED) -> list[TileTemplate]:
    """A fixed-seed sample of the grid, in a fixed order."""
    return random.Random(seed).sample(template_grid(), size)


def tile_action_space(extra: int = 40) -> list[str]:
    """The tile Q-network's actions (tile_actions.py): the cover's templates and the first `extra` other
    pool templates, each packed, then all unpacked (the same nest except where packing is optional)."""
    cover = list(load_cover())
    templates = cover + [t for t in template_pool() if t not in cover][:extra]
    return [tile_action(t) for t in templates + unpacked(templates)]


def fits(template: TileTemplate, target: Target) -> bool:
    """The register tile fits the target's accumulator registers (else the tile would open lower)."""
    return template.rows * template.vectors <= target.accumulator_registers


def cover_path() -> Path:
    from optserve.config import LoopTuneSettings

    return LoopTuneSettings().policy_path.parent / "tiles.json"


@functools.cache
def load_cover(path: str | None = None) -> tuple[TileTemplate, ...]:
    """The bundled cover (templates in the order they are tried); empty if there is no tiles.json."""
    file = Path(path) if path else cover_path()
    if not file.is_file():
        return ()
    return tuple(TileTemplate.from_name(name) for name in json.loads(file.read_text())["cover"])


def unpacked(templates: list[TileTemplate] | tuple[TileTemplate, ...]) -> list[TileTemplate]:
    """The templates' unpacked twins (a nest that needs no packing: the same template)."""
    return [dataclasses.replace(t, pack=False) for t in templates if t.pack]


def candidates(
    evaluator: Evaluator, templates: list[TileTemplate] | tuple[TileTemplate, ...], target: Target
) -> list[tuple[str, Schedule]]:
    """(template name, schedule) of every template that fits the target, one per distinct compute nest."""
    seen: set[str] = set()
    out = []
    for template in templates:
        if not fits(template, target):
            continue
        width = target.vector_widths[0] if target.vector_widths else 1
        schedule = tiled_schedule(evaluator.spec, template, width)
        if schedule.compute_key() not in seen:
            seen.add(schedule.compute_key())
            out.append((template.name(), schedule))
    return out


def with_wide_tiles(evaluator: Evaluator, cover: list[TileTemplate]) -> list[TileTemplate]:
    """`cover` with WIDE_TILES first where the decision is for a large contraction (`evaluator.whole`: timed
    on a sub-problem that keeps its one reduction whole, policies/proxy.py `deep_reduction`, or whole on
    several threads), else `cover` as it is."""
    if evaluator.whole is None or deep_reduction(evaluator.spec) is None:
        return cover
    return list(WIDE_TILES) + [t for t in cover if t not in WIDE_TILES]


def prefer_wide(
    evaluator: Evaluator, options: list[tuple[tuple[str, ...], Schedule]], outcome: SearchOutcome
) -> SearchOutcome:
    """On a deep sub-problem (`with_wide_tiles`), the fastest measured WIDE_TILES option (on one thread the
    first of them, where measured) unless the outcome beats it by more than WIDE_MARGIN; else the outcome. On
    one thread an outcome outside WIDE_TILES does not replace the first where the whole holds it whole
    (`holds_wide_tile`, WIDE_WHOLE)."""
    if evaluator.whole is None or deep_reduction(evaluator.spec) is None or not outcome.gflops:
        return outcome
    wide = {TILE_ACTION + t.name() for t in WIDE_TILES}
    measured = [
        (evaluator.cache[s.compute_key()], actions, s)
        for actions, s in options
        if actions and actions[0] in wide and evaluator.cache.get(s.compute_key())
    ]
    if not measured:
        return outcome
    if evaluator.threads == 1:  # the first of them, measured, where it leads on the whole (WIDE_TILES)
        first = TILE_ACTION + WIDE_TILES[0].name()
        measured = [m for m in measured if m[1][0] == first] or measured
    gflops, actions, schedule = max(measured, key=lambda m: m[0])
    if outcome.actions == actions:
        return outcome
    challenger_wide = bool(outcome.actions) and outcome.actions[0] in wide
    kept = evaluator.threads == 1 and not challenger_wide and holds_wide_tile(evaluator.whole)
    if gflops * WIDE_MARGIN < outcome.gflops and not kept:
        return outcome
    return SearchOutcome(AgentState(schedule), actions, gflops, outcome.timed_out)


def holds_wide_tile(spec: LoopNestSpec) -> bool:
    """The contraction's vectorized and row indices are each at least WIDE_WHOLE long (`prefer_wide`)."""
    role = roles(spec)
    size = spec.size_of
    return all(size[index] >= WIDE_WHOLE for index in (role.vector, *role.rows))


def tie_deadline(evaluator: Evaluator, deadline: float) -> float:
    """Where the first pass over the options stops: TIE_SHARE of the time left is kept for `settle_ties`
    where the evaluator can time near ties again; else `deadline`."""
    if evaluator.rematch_fn is None:
        return deadline
    return deadline - TIE_SHARE * max(0.0, deadline - clock.now())


def settle_ties(
    evaluator: Evaluator,
    options: list[tuple[tuple[str, ...], Schedule]],
    outcome: SearchOutcome,
    deadline: float,
) -> SearchOutcome:
    """The fastest of the TIES best measured options within TIE_MARGIN of the best, timed again against
    each other in interleaved rounds until `deadline` (`Evaluator.rematch`); `outcome` where fewer than two
    are that close or the evaluator cannot time them again."""
    if evaluator.rematch_fn is None or not outcome.gflops:
        return outcome
    measured: dict[str, tuple[float, tuple[str, ...], Schedule]] = {}
    for actions, schedule in options:
        key = schedule.compute_key()
        gflops = evaluator.cache.get(key)
        if gflops and key not in measured:
            measured[key] = (gflops, actions, schedule)
    ranked = sorted(measured.values(), key=lambda m: -m[0])
    ties = [m for m in ranked if m[0] * TIE_MARGIN >= ranked[0][0]][:TIES] if ranked else []
    if len(ties) < 2:
        return outcome
    again = evaluator.rematch([schedule for _, _, schedule in ties], deadline) or []
    timed = [(g, actions, schedule) for g, (_, actions, schedule) in zip(again, ties, strict=True) if g]
    if len(timed) < 2:
        return outcome
    gflops, actions, schedule = max(timed, key=lambda m: m[0])
    return SearchOutcome(AgentState(schedule), actions, gflops, outcome.timed_out)


def decide(
    evaluator: Evaluator, options: list[tuple[tuple[str, ...], Schedule]], deadline: float
) -> SearchOutcome:
    """The options measured in order (`measure_in_order`), near ties timed again (`settle_ties`), a wide tile
    kept within its margin (`prefer_wide`)."""
    outcome = measure_in_order(evaluator, options, tie_deadline(evaluator, deadline))
    return prefer_wide(evaluator, options, settle_ties(evaluator, options, outcome, deadline))


def measure_in_order(
    evaluator: Evaluator, options: list[tuple[tuple[str, ...], Schedule]], deadline: float
) -> SearchOutcome:
    """Measure the options in order until the deadline, and past it until one compiles (the backend may
    refuse one: 0 GFLOPS); the fastest one. Once one compiled, an option is started only while more than
    half the mean cost of those measured before it (JIT compile and timing) is left: the decision ends
    within about half a measurement of its deadline, not a whole one past it (up to 0.4 s on a loaded
    host), and measures as many options as it did before on average."""
    best: SearchOutcome | None = None
    timed_out = False
    costs: list[float] = []
    for actions, schedule in options:
        half = sum(costs) / len(costs) / 2 if costs else 0.0
        if best is not None and best.gflops and clock.now() + half >= deadline:
            timed_out = True
            break
        started, evaluations = clock.now(), evaluator.evaluations
        gflops = evaluator.gflops(schedule)
        if evaluator.evaluations > evaluations:  # measured now, not answered from the evaluator's cache
            costs.append(clock.now() - started)
        if best is None or gflops > best.gflops:  # type: ignore[operator]
            best = SearchOutcome(AgentState(schedule), actions, gflops)
    assert best is not None, "no options to measure"
    best.timed_out = timed_out
    return best


def tiles_search(
    evaluator: Evaluator, root: AgentState, deadline: float, target: Target | None = None
) -> SearchOutcome:
    """The cover, the rest of the pool, then the base schedule, measured until the deadline."""
    target = target or host_target()
    cover = with_wide_tiles(evaluator, list(load_cover()))
    rest = [t for t in template_pool() if t not in cover]
    ordered = cover + unpacked(cover) + rest + unpacked(rest)
    options = [((TILE_ACTION + name,), s) for name, s in candidates(evaluator, ordered, target)]
    options.append(((), root.schedule))
    return decide(evaluator, options, deadline)


def policy_tiles(
    evaluator: Evaluator,
    root: AgentState,
    deadline: float,
    target: Target | None = None,
    policy_path: str | None = None,
) -> SearchOutcome:
    """The cover's templates (in reverse for an NCHW convolution on its channels; for an NHWC one after
    kernels/tiling.py's CHANNELS_LAST_TILES, `channels_last_first`), then the Q-policy's final
    schedule, then the cover's unpacked twins where they differ (the twins first where packing is unlikely
    to pay), then the base, measured until the deadline; WIDE_TILES ahead of the cover on a large
    contraction's deep sub-problem (`with_wide_tiles`), kept there within WIDE_MARGIN (`prefer_wide`); near
    ties timed again (`settle_ties`). A
    tile Q-network's pick (tile_actions.py) is measured first: it is the network's guess of the best
    template for this shape, and on a large contraction the budget may not reach past the cover."""
    from optserve.policies.policy import decision_policy_path, load_bundle, rollout

    target = target or host_target()
    bundle = load_bundle(str(policy_path or decision_policy_path()))
    visited = rollout(bundle.network, evaluator.spec, start=root, target=target)
    cover = channels_last_first(evaluator.spec, with_wide_tiles(evaluator, list(load_cover())))
    channel = channel_vector(evaluator.spec)
    if channel:
        # the cover's order is the matmuls' (its first templates, small k-blocked tiles, cover most of
        # them); a channel nest favours its last, wide ones: on the lent Xeon 8x2 was within 3 % of the
        # best of five templates on resnet conv4 3x3, conv5 and conv4 1x1 reduce, 4x4 at 0.62-0.84 of it
        cover.reverse()
    reuse = packed_reuse(evaluator.spec)
    layouts = [cover, unpacked(cover)]
    if reuse is not None and reuse < PACK_REUSE:
        layouts.reverse()
    if channel:  # NCHW: channels vectorized (packed) or the image row (unpacked), each template both ways
        # (a narrow row: every template on channels first)
        row = evaluator.spec.size_of[evaluator.spec.output.dims[-1][0]]
        if row >= CHANNEL_ONLY_ROW:
            pairs = zip(*(layouts[::-1] if row >= CHANNEL_ROW else layouts), strict=True)
            layouts = [[template for pair in pairs for template in pair], []]
    policy_option = (tuple(visited.actions), visited.final.schedule)
    options = [((TILE_ACTION + name,), s) for name, s in candidates(evaluator, layouts[0], target)]
    if bundle.network.tile_actions:
        picked = policy_option[1].compute_key()
        options = [policy_option] + [o for o in options if o[1].compute_key() != picked]
    else:
        options.append(policy_option)
    seen = {s.compute_key() for _, s in options}
    second = candidates(evaluator, layouts[1], target)
    options += [((TILE_ACTION + name,), s) for name, s in second if s.compute_key() not in seen]
    options.append(((), root.schedule))  # the fallback, measured only if the budget lasts
    return decide(evaluator, options, deadline)
