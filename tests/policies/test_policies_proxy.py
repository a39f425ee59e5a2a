"""No size refused: a large contraction is decided on a sub-problem and the decision replayed on it."""

from __future__ import annotations

import time

from optserve.config import LoopTuneSettings
from optserve.kernels.jit import host_target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate
from optserve.policies.proxy import blocks_within, deep_reduction, replay, timed_spec
from optserve.policies.scheduler import schedule_nest

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
CONV = "O[f,y,x] += I[c,y+r,x+s] * W[f,c,r,s]"


def test_a_layer_sized_matmul_is_accepted():
    """768 x 256 x 1000, an ordinary layer: only memory bounds a contraction, not its FLOPs."""
    spec = LoopNestSpec.parse(MATMUL, {"m": 768, "k": 256, "n": 1000})
    assert spec.flops > LoopTuneSettings().timed_flops


def test_the_timed_spec_halves_the_largest_sizes_until_it_fits():
    spec = LoopNestSpec.parse(MATMUL, {"m": 2048, "k": 2048, "n": 2048})
    small = timed_spec(spec, 2 * 512**3)
    # one reduction: kept whole, the output indices cut (the whole's cache blocks along k are timed)
    assert small.size_of == {"m": 256, "k": 2048, "n": 256} and small.text() == spec.text()
    assert deep_reduction(spec) == "k"
    assert timed_spec(spec, 2 * 128 * 2048 * 128).size_of == {"m": 128, "k": 2048, "n": 128}
    # outputs at DEEP_OUTPUT: the largest sizes, the reduction first
    assert timed_spec(spec, 2 * 128**3).size_of == {"m": 128, "k": 128, "n": 128}
    batched = LoopNestSpec.parse("C[b,m,n] += A[b,m,k] * B[b,k,n]", {"b": 8, "m": 512, "k": 512, "n": 512})
    assert timed_spec(batched, 2 * 512**3).size_of == {"b": 8, "m": 128, "k": 512, "n": 256}
    conv = LoopNestSpec.parse(CONV, {"f": 256, "c": 256, "y": 56, "x": 56, "r": 3, "s": 3})
    shrunk = timed_spec(conv, 2 * 512**3).size_of
    assert shrunk["r"] == shrunk["s"] == 3 and shrunk["y"] == 56 and conv.flops > 2 * 512**3
    assert deep_reduction(conv) is None  # a window and channels: the largest sizes first, as before
    assert 2 * (shrunk["f"] * shrunk["c"] * 56 * 56 * 9) <= 2 * 512**3
    small_already = LoopNestSpec.parse(MATMUL, {"m": 64, "k": 64, "n": 64})
    assert timed_spec(small_already, 2 * 512**3) is small_already


def test_replay_builds_the_decision_on_the_whole_contraction():
    spec = LoopNestSpec.parse(MATMUL, {"m": 1000, "k": 700, "n": 900})
    target = host_target()
    tiled = replay(spec, ["tile:4x2rv-k128"], target)
    tiled.check(spec)
    assert tiled.compute[-1].index == "n"
    walked = replay(spec, ["down", "split_16", "swap_up", "split_8"], target)
    walked.check(spec)
    assert len(walked.compute) == 5


def test_a_2048_cube_is_decided_within_a_second_of_budget():
    """The default decision on 2048^3 (17 GFLOP) at one thread times candidates on 256 x 2048 x 256 and
    answers for 2048^3, the wide register tiles measured first."""
    spec = LoopNestSpec.parse(MATMUL, {"m": 2048, "k": 2048, "n": 2048})
    warm = LoopNestSpec.parse(MATMUL, {"m": 32, "k": 32, "n": 32})
    schedule_nest(warm, method="policy_tiles", threads=1)
    start = time.perf_counter()
    result = schedule_nest(spec, method="policy_tiles", time_limit_s=10, threads=1)
    seconds = time.perf_counter() - start
    assert result.timed_sizes == {"m": 256, "k": 2048, "n": 256}
    assert result.gflops and result.evaluations >= 1 and result.compile_ms
    Schedule.from_text(result.schedule).check(spec)
    assert seconds < 5  # 0.5 s budget + a timing that may run past it + the whole's compile, on busy cores


def test_a_template_replayed_on_a_larger_whole_keeps_blocks_of_the_timed_size_and_packs_b():
    spec = LoopNestSpec.parse(MATMUL, {"m": 2048, "k": 2048, "n": 2048})
    timed = LoopNestSpec.parse(MATMUL, {"m": 512, "k": 512, "n": 512})
    within = blocks_within(TileTemplate.from_name("12x1rv"), timed)
    assert (within.k_block, within.v_block, within.r_block) == (512, 512, 512)
    kept = blocks_within(TileTemplate.from_name("4x4rv-k64-r64"), timed)
    assert (kept.k_block, kept.v_block, kept.r_block) == (64, 512, 64)  # smaller blocks stay as they are
    replayed = replay(spec, ["tile:12x1rv"], host_target(), timed)
    replayed.check(spec)
    assert replayed.pack == ("A", "B")  # 16 MiB operands: both in panels (kernels/tiling.py large_panels)
    assert [lp.size for lp in replayed.compute if lp.index == "k"] == [4, 512]  # k in blocks of 512
    deep = blocks_within(TileTemplate.from_name("6x4rv-k256-v512-r96"), timed_spec(spec, 2 * 512**3))
    assert (deep.k_block, deep.v_block, deep.r_block) == (256, 256, 96)  # n of the deep sub-problem: 256
    assert replay(spec, ["tile:12x1rv"], host_target()) != replayed  # without the timed spec: unblocked


def test_a_deep_sub_problem_measures_the_wide_tiles_first_and_nothing_else_does():
    from optserve.policies.env import Evaluator
    from optserve.policies.tiles import WIDE_TILES, load_cover, with_wide_tiles

    spec = LoopNestSpec.parse(MATMUL, {"m": 2048, "k": 2048, "n": 2048})
    cover = list(load_cover())
    timed = Evaluator(timed_spec(spec, 2 * 512**3), lambda s, schedule: 1.0, whole=spec)
    ordered = with_wide_tiles(timed, cover)
    assert ordered[: len(WIDE_TILES)] == list(WIDE_TILES) and set(cover) <= set(ordered)
    assert len(ordered) == len(set(ordered))
    assert with_wide_tiles(Evaluator(spec, lambda s, schedule: 1.0), cover) == cover  # timed whole
    conv = LoopNestSpec.parse(CONV, {"f": 256, "c": 256, "y": 56, "x": 56, "r": 3, "s": 3})
    conv_timed = Evaluator(timed_spec(conv, 2 * 512**3), lambda s, schedule: 1.0, whole=conv)
    assert with_wide_tiles(conv_timed, cover) == cover


def test_a_deep_sub_problem_keeps_a_wide_tile_within_the_margin():
    from optserve.policies.env import AgentState, Evaluator
    from optserve.policies.tiles import WIDE_MARGIN, WIDE_TILES, policy_tiles

    spec = LoopNestSpec.parse(MATMUL, {"m": 2048, "k": 2048, "n": 2048})
    timed = timed_spec(spec, 2 * 512**3)
    keys = [replay(timed, ["tile:" + t.name()], host_target()).compute_key() for t in WIDE_TILES]

    def landscape(lead: float):
        def gflops(s, schedule):  # the second wide tile 100, the other wide ones 50, the rest 100 * lead
            key = schedule.compute_key()
            return (100.0 if key == keys[1] else 50.0) if key in keys else 100.0 * lead

        return gflops

    for lead, kept in ((WIDE_MARGIN * 0.99, True), (WIDE_MARGIN * 1.01, False)):
        evaluator = Evaluator(timed, landscape(lead), whole=spec, threads=16)  # the fastest wide tile
        outcome = policy_tiles(evaluator, AgentState(Schedule.base(timed)), time.perf_counter() + 60)
        assert (outcome.actions == ("tile:" + WIDE_TILES[1].name(),)) == kept, (lead, outcome.actions)
        assert outcome.gflops == (100.0 if kept else 100.0 * lead)


def test_on_one_thread_a_deep_sub_problem_keeps_the_first_wide_tile():
    from optserve.policies.env import AgentState, Evaluator
    from optserve.policies.tiles import WIDE_MARGIN, WIDE_TILES, policy_tiles

    spec = LoopNestSpec.parse(MATMUL, {"m": 2048, "k": 2048, "n": 2048})
    timed = timed_spec(spec, 2 * 512**3)
    keys = [replay(timed, ["tile:" + t.name()], host_target()).compute_key() for t in WIDE_TILES]

    def landscape(lead: float):
        def gflops(s, schedule):  # the first wide tile 95, the second 100, the rest 95 * lead
            key = schedule.compute_key()
            return (95.0 if key == keys[0] else 100.0) if key in keys else 95.0 * lead

        return gflops

    for threads, lead, chosen in (
        (1, WIDE_MARGIN * 0.99, WIDE_TILES[0]),  # the second is faster, not by the margin
        (16, WIDE_MARGIN * 0.99, WIDE_TILES[1]),  # on threads the fastest wide tile
        (1, WIDE_MARGIN * 1.01, WIDE_TILES[0]),  # on one thread the whole holds the first: kept whatever
    ):
        evaluator = Evaluator(timed, landscape(lead), whole=spec, threads=threads)
        outcome = policy_tiles(evaluator, AgentState(Schedule.base(timed)), time.perf_counter() + 60)
        if chosen is None:
            assert outcome.actions[0] not in {"tile:" + t.name() for t in WIDE_TILES}, (threads, lead)
        else:
            assert outcome.actions == ("tile:" + chosen.name(),), (threads, lead, outcome.actions)


def test_on_one_thread_a_narrow_whole_lets_another_tile_beat_the_wide_ones_by_the_margin():
    from optserve.policies.env import AgentState, Evaluator
    from optserve.policies.tiles import WIDE_MARGIN, WIDE_TILES, holds_wide_tile, policy_tiles

    spec = LoopNestSpec.parse(MATMUL, {"m": 4096, "k": 4096, "n": 16})  # 16 columns: 6x4 is one vector wide
    assert not holds_wide_tile(spec)
    timed = timed_spec(spec, 2 * 512**3)
    keys = {replay(timed, ["tile:" + t.name()], host_target()).compute_key() for t in WIDE_TILES}

    def gflops(s, schedule):  # the wide tiles 50, the rest faster by more than the margin
        return 50.0 if schedule.compute_key() in keys else 50.0 * WIDE_MARGIN * 1.01

    evaluator = Evaluator(timed, gflops, whole=spec, threads=1)
    outcome = policy_tiles(evaluator, AgentState(Schedule.base(timed)), time.perf_counter() + 60)
    assert outcome.actions[0] not in {"tile:" + t.name() for t in WIDE_TILES}, outcome.actions
