"""The tile space: the template pool, the bundled cover, and the two methods that measure tiled schedules."""

from __future__ import annotations

import time

import pytest

from optserve.kernels.codegen import Target, generate_ir
from optserve.kernels.jit import host_target
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec
from optserve.kernels.tiling import TileTemplate, tiled_schedule
from optserve.looptune_training.suites import KINDS
from optserve.policies.env import AgentState, Evaluator, apply_action
from optserve.policies.scheduler import CUT_SLACK, schedule_nest
from optserve.policies.search import run_search
from optserve.policies.tiles import (
    TILE_ACTION,
    candidates,
    cover_path,
    fits,
    load_cover,
    measure_in_order,
    template_pool,
    unpacked,
)

MATMUL = LoopNestSpec.parse("C[m,n] += A[m,k] * B[k,n]", {"m": 96, "k": 80, "n": 112})


def more_loops_are_faster(spec, schedule):
    return float(len(schedule.compute))


def test_pool_is_a_fixed_sample_of_the_grid():
    assert template_pool() == template_pool() and len(set(template_pool())) == len(template_pool())


def test_bundled_cover_is_read_and_its_templates_fit_avx512():
    cover = load_cover()
    assert cover_path().is_file() and 1 <= len(cover) <= 16
    assert all(fits(t, Target(vector_widths=(16, 8), accumulator_registers=28)) for t in cover)


def test_candidates_skip_tiles_the_target_cannot_hold_and_repeated_nests():
    evaluator = Evaluator(MATMUL, more_loops_are_faster)
    small = Target(vector_widths=(8,), accumulator_registers=12)
    templates = [TileTemplate(14, 2), TileTemplate(4, 2), TileTemplate(4, 2, k_block=1000)]
    assert [name for name, _ in candidates(evaluator, templates, small)] == ["4x2rv"]


def test_measuring_in_order_keeps_the_fastest_and_stops_at_the_deadline():
    evaluator = Evaluator(MATMUL, more_loops_are_faster)
    base = Schedule.base(MATMUL)
    options = [((), base)] + [
        ((TILE_ACTION + n,), s) for n, s in candidates(evaluator, template_pool(), Target())
    ]
    best = measure_in_order(evaluator, options, time.perf_counter() + 60)
    assert best.gflops == max(len(s.compute) for _, s in options) and not best.timed_out
    late = measure_in_order(Evaluator(MATMUL, more_loops_are_faster), options, time.perf_counter() - 1)
    assert late.state.schedule == base and late.timed_out  # the first option is always measured
    refused = Evaluator(MATMUL, lambda spec, s: 0.0 if s == base else 1.0)
    assert (
        measure_in_order(refused, options, time.perf_counter() - 1).gflops == 1.0
    )  # past it, to one that runs


@pytest.mark.parametrize("method", ["tiles", "policy_tiles"])
def test_tile_methods_return_a_tiled_schedule_named_by_its_template(method):
    evaluator = Evaluator(MATMUL, more_loops_are_faster)
    outcome = run_search(method, evaluator, 30.0)
    (action,) = outcome.actions
    template = TileTemplate.from_name(action.removeprefix(TILE_ACTION))
    assert outcome.gflops == len(outcome.state.schedule.compute) and template in (
        *load_cover(),
        *template_pool(),
    )
    outcome.state.schedule.check(MATMUL)


def test_policy_tiles_keeps_the_q_policy_when_it_measures_best():
    seen = []

    def q_policy_wins(spec, schedule):
        seen.append(schedule)
        return 2.0 if len(seen) == len(load_cover()) + 1 else 1.0  # after the cover: the Q-policy's

    outcome = run_search("policy_tiles", Evaluator(MATMUL, q_policy_wins), 30.0)
    assert outcome.gflops == 2.0 and not outcome.actions[0].startswith(TILE_ACTION)
    replayed = AgentState(Schedule.base(MATMUL))
    for action in outcome.actions:
        replayed = apply_action(replayed, action)  # type: ignore[assignment]
    assert replayed.schedule == outcome.state.schedule


def test_schedule_nest_decides_a_convolution_with_the_quick_protocol():
    spec = LoopNestSpec.parse(KINDS["conv_nhwc"], {"n": 1, "y": 6, "x": 10, "c": 8, "f": 24, "r": 3, "s": 3})
    result = schedule_nest(spec, "policy_tiles", time_limit_s=5.0)
    assert result.gflops and result.gflops > 0
    assert result.evaluations >= 1 and result.seconds < 5.0  # under load the 0.5 s may hold one timing only


def test_quick_decision_stops_at_its_budget_and_still_answers_a_measured_schedule():
    from optserve.config import LoopTuneSettings

    tight = LoopTuneSettings(polish_time_s=1e-3)
    result = schedule_nest(MATMUL, "policy_tiles", time_limit_s=5.0, settings=tight)
    assert result.evaluations == 1 and result.timed_out  # the first template, and not the base
    assert result.gflops and result.gflops > 0 and result.actions[0].startswith(TILE_ACTION)
    assert result.base_gflops is None and result.speedup is None  # the base was not reached: not timed


def record_measured(monkeypatch, deadlines: list | None = None) -> list[Schedule]:
    """Replace the scheduler's timing with 1 GFLOPS per loop, recording what it is asked to measure (and
    the deadline that may cut each timing short)."""
    import optserve.policies.scheduler as scheduler

    measured: list[Schedule] = []

    def fake(
        spec, schedule, settings=None, compile_log=None, quick=False, deadline=None, threads=1, finalists=None
    ):
        measured.append(schedule)
        if deadlines is not None:
            deadlines.append(deadline)
        compile_log.append(0.0)
        return float(len(schedule.compute))

    monkeypatch.setattr(scheduler, "measure_schedule", fake)
    return measured


@pytest.mark.parametrize("kind", ["matmul", "matmul_bt", "matmul_at"])
def test_quick_decision_measures_the_cover_before_the_base_and_each_schedule_once(monkeypatch, kind):
    spec = LoopNestSpec.parse(KINDS[kind], {"m": 96, "k": 80, "n": 112})
    from optserve.config import LoopTuneSettings

    deadlines: list = []
    measured = record_measured(monkeypatch, deadlines)
    roomy = LoopTuneSettings(polish_time_s=30.0)  # room for every option even on a loaded machine
    started = time.perf_counter()
    result = schedule_nest(spec, "policy_tiles", time_limit_s=30.0, settings=roomy)
    evaluator = Evaluator(spec, more_loops_are_faster)
    cover = [s for _, s in candidates(evaluator, load_cover(), host_target())]
    twins = [s for _, s in candidates(evaluator, unpacked(load_cover()), host_target()) if s not in cover]
    assert bool(twins) == (kind != "matmul")  # the unpacked layout differs only where B or A may be packed
    assert measured[0] != Schedule.base(spec) and measured[: len(cover)] == cover
    assert len(measured) == len(set(s.compute_key() for s in measured)) == result.evaluations
    # the cover, the Q-policy's schedule, the cover's unpacked twins, the base
    assert result.evaluations <= len(cover) + len(twins) + 2 and set(twins) <= set(measured[len(cover) :])
    assert measured[-1] == Schedule.base(spec) and result.base_gflops
    assert deadlines[0] is None  # after the first, a timing that would overrun the budget by more than
    assert all(d >= started + 30.0 * (1 + CUT_SLACK) for d in deadlines[1:])  # the slack is cut short


def test_quick_decision_does_not_time_the_base_once_the_budget_is_spent(monkeypatch):
    from optserve.config import LoopTuneSettings

    deadlines: list = []
    measured = record_measured(monkeypatch, deadlines)
    spec = LoopNestSpec.parse(KINDS["matmul_bt"], {"m": 512, "k": 512, "n": 512})
    result = schedule_nest(
        spec, "policy_tiles", time_limit_s=5.0, settings=LoopTuneSettings(polish_time_s=1e-3)
    )
    assert Schedule.base(spec) not in measured and result.base_gflops is None and result.evaluations == 1
    assert deadlines == [None]  # the answer's timing is never cut short, even past the deadline


def test_tiles_search_measures_the_base_last():
    seen = []

    def record(spec, schedule):
        seen.append(schedule)
        return 1.0

    run_search("tiles", Evaluator(MATMUL, record), 60.0)
    assert seen[-1] == Schedule.base(MATMUL) and Schedule.base(MATMUL) not in seen[:-1]


def test_a_full_search_still_reports_the_base_it_did_not_reach_within_its_time_limit(monkeypatch):
    deadlines: list = []
    measured = record_measured(monkeypatch, deadlines)
    started = time.perf_counter()
    result = schedule_nest(MATMUL, "tiles", time_limit_s=1e-3)
    finished = time.perf_counter()
    assert result.base_gflops == len(Schedule.base(MATMUL).compute) and result.speedup
    assert measured[-1] == Schedule.base(MATMUL) and deadlines[0] is None
    slack = 1e-3 * (1 + CUT_SLACK)  # the base, timed after the search, is cut short if it would overrun
    assert deadlines[-1] is not None and started + slack <= deadlines[-1] <= finished + slack


def _tiles_search_order(kind: str) -> tuple[list[Schedule], int]:
    """The schedules the `tiles` search measures on a 96x80x112 `kind`, in order, and the cover's size."""
    spec = LoopNestSpec.parse(KINDS[kind], {"m": 96, "k": 80, "n": 112})
    seen: list[Schedule] = []

    def record(spec, schedule):
        seen.append(schedule)
        return 1.0

    run_search("tiles", Evaluator(spec, record), 60.0)
    return seen, len(candidates(Evaluator(spec, record), load_cover(), host_target()))


def test_tiles_search_measures_both_layouts_of_a_b_transposed():
    seen, cover = _tiles_search_order("matmul_bt")
    innermost = [s.compute[-1].index for s in seen[:-1]]
    assert set(innermost[:cover]) == {"n"}  # the cover first, packed (B read as B_packed[k,n])
    assert "k" in innermost[cover:]  # and the unpacked twins (partial sums along k) after it


def test_the_decision_packs_b_for_a_b_transposed():
    """Real timings: at 256^3 the packed matmul (n vectorized on a packed B) beats partial sums along k
    (docs/bench/looptune_packing.md), and the decision measures the packed cover first. On one thread
    and a CPU-time budget: a kernel on a team of threads, timed on a loaded host (another test folder's
    processes), measures the load, and a wall-clock budget measures fewer or more candidates with it."""
    from optserve.config import LoopTuneSettings

    spec = LoopNestSpec.parse(KINDS["matmul_bt"], {"m": 256, "k": 256, "n": 256})
    settings = LoopTuneSettings(budget_clock="cpu", polish_time_s=0.5)
    result = schedule_nest(spec, "policy_tiles", time_limit_s=5.0, threads=1, settings=settings)
    chosen = Schedule.from_text(result.schedule)
    assert chosen.compute[-1].index == "n"  # vectorized along n: only possible on a packed B
    assert "call void @pack1" in generate_ir(spec, chosen, host_target())


@pytest.mark.parametrize("m, packed_first", [(16, False), (256, True)])
def test_the_decision_measures_the_layout_likely_to_win_first(monkeypatch, m, packed_first):
    """With B read by only 16 rows of A the copy costs about what it saves: the unpacked twins first."""
    from optserve.config import LoopTuneSettings

    measured = record_measured(monkeypatch)
    spec = LoopNestSpec.parse(KINDS["matmul_bt"], {"m": m, "k": 80, "n": 112})
    schedule_nest(spec, "policy_tiles", time_limit_s=30.0, settings=LoopTuneSettings(polish_time_s=30.0))
    layout = load_cover() if packed_first else unpacked(load_cover())
    first = measured[: len(candidates(Evaluator(spec, more_loops_are_faster), layout, host_target()))]
    assert {s.compute[-1].index for s in first} == ({"n"} if packed_first else {"k"})
    assert {s.compute[-1].index for s in measured} >= {"n", "k"}  # both layouts measured with time left


def test_tiles_search_measures_a_transposed_a_packed_and_in_place():
    seen, cover = _tiles_search_order("matmul_at")
    assert {s.pack for s in seen[:cover]} == {("A",)}  # the cover first, A copied as A_packed[m,k]
    in_place = [s for s in seen[cover:-1] if not s.pack]
    assert {s.compute for s in in_place} >= {s.compute for s in seen[:cover]}  # then every twin in place
    assert len(seen) == len({s.compute_key() for s in seen})


@pytest.mark.parametrize("n, packed_first", [(16, False), (256, True)])
def test_the_decision_packs_a_first_only_where_it_is_read_often(monkeypatch, n, packed_first):
    """A^T·B: each element of A is read by n columns; with 16 the in-place twins are measured first."""
    from optserve.config import LoopTuneSettings

    measured = record_measured(monkeypatch)
    spec = LoopNestSpec.parse(KINDS["matmul_at"], {"m": 112, "k": 80, "n": n})
    schedule_nest(spec, "policy_tiles", time_limit_s=30.0, settings=LoopTuneSettings(polish_time_s=30.0))
    layout = load_cover() if packed_first else unpacked(load_cover())
    first = measured[: len(candidates(Evaluator(spec, more_loops_are_faster), layout, host_target()))]
    assert {s.pack for s in first} == ({("A",)} if packed_first else {()})
    assert {s.pack for s in measured} == {("A",), ()}  # both layouts measured with time left


def test_measuring_in_order_starts_no_option_with_less_than_half_its_mean_cost_left(monkeypatch):
    from optserve.policies import clock

    now = [100.0]
    monkeypatch.setattr(clock, "now", lambda: now[0])

    def costs_a_tenth(spec, schedule):  # every measurement takes 0.1 s on the budget clock
        now[0] += 0.1
        return float(len(schedule.compute))

    evaluator = Evaluator(MATMUL, costs_a_tenth)
    options = [((TILE_ACTION + n,), s) for n, s in candidates(evaluator, template_pool(), Target())]
    best = measure_in_order(evaluator, options, deadline=100.34)
    # the fourth would start at 100.3 with 0.04 s left, less than half of 0.1: not started
    assert evaluator.evaluations == 3 and best.timed_out and now[0] <= 100.34
    again = Evaluator(MATMUL, costs_a_tenth)
    now[0] = 100.0
    measure_in_order(again, options, deadline=100.36)  # 0.06 s left at 100.3: started, ends 100.4
    assert again.evaluations == 4 and now[0] <= 100.36 + 0.05
    late = Evaluator(MATMUL, costs_a_tenth)
    assert measure_in_order(late, options, deadline=0.0).gflops and late.evaluations == 1  # one always


@pytest.mark.parametrize("x, channels_first", [(14, True), (40, False)])
def test_a_narrow_image_row_measures_every_template_on_channels_first(monkeypatch, x, channels_first):
    """NCHW with a 14-wide row: the whole cover on channels (f innermost) before any template on the row;
    from 32 wide each template is measured both ways in turn."""
    from optserve.config import LoopTuneSettings

    measured = record_measured(monkeypatch)
    sizes = {"n": 1, "f": 32, "c": 8, "y": 4, "x": x, "r": 1, "s": 1}
    spec = LoopNestSpec.parse(KINDS["conv_nchw"], sizes)
    schedule_nest(spec, "policy_tiles", time_limit_s=30.0, settings=LoopTuneSettings(polish_time_s=30.0))
    cover = len(candidates(Evaluator(spec, more_loops_are_faster), load_cover(), host_target()))
    inner = [s.compute[-1].index for s in measured]
    assert set(inner[:cover]) == ({"f"} if channels_first else {"f", "x"})
    widest_first = tiled_schedule(spec, load_cover()[-1], host_target().vector_widths[0])
    assert widest_first.compute_key() in [s.compute_key() for s in measured[:2]]  # the cover reversed
    assert {"f", "x"} <= set(inner)  # both layouts measured with time left


def test_near_ties_are_timed_again_and_the_rematch_decides():
    from optserve.policies.tiles import TIE_MARGIN, TIES, settle_ties, tie_deadline

    options = [
        ((TILE_ACTION + n,), s) for n, s in candidates(Evaluator(MATMUL, None), load_cover(), host_target())
    ]
    first = {s.compute_key(): 100.0 - 3 * i for i, (_, s) in enumerate(options)}  # the first option leads
    first[options[-1][1].compute_key()] = 100.0 / TIE_MARGIN / 1.01  # too slow to be a near tie
    asked: list[list[Schedule]] = []

    def rematch(spec, schedules, deadline):  # timed again, the second of them is the fastest
        asked.append(schedules)
        return [90.0 + 20.0 * (i == 1) for i in range(len(schedules))]

    evaluator = Evaluator(MATMUL, lambda s, schedule: first[schedule.compute_key()], rematch_fn=rematch)
    deadline = time.perf_counter() + 60
    assert tie_deadline(evaluator, deadline) < deadline - 11  # a fifth of the time left is kept for it
    outcome = measure_in_order(evaluator, options, deadline)
    assert outcome.actions == options[0][0]
    settled = settle_ties(evaluator, options, outcome, deadline)
    assert [s for s in asked[0]] == [s for _, s in options[: min(TIES, len(options) - 1)]]
    assert settled.actions == options[1][0] and settled.gflops == 110.0
    assert evaluator.cache[options[1][1].compute_key()] == 110.0  # the rematch's timings replace the first
    alone = Evaluator(MATMUL, lambda s, schedule: first[schedule.compute_key()])  # no rematch: as measured
    assert settle_ties(alone, options, measure_in_order(alone, options, deadline), deadline) == outcome
    assert tie_deadline(alone, deadline) == deadline


def test_the_finalists_keep_the_fastest_kernels_and_free_the_rest():
    from optserve.policies.scheduler import Finalists

    class Kernel:
        closed = 0

        def close(self):
            self.closed += 1

    kernels = [Kernel() for _ in range(5)]
    finalists = Finalists(size=2)
    speeds = (5, 9, 0, 7, 8)
    kept = [finalists.offer(str(i), g, k) for i, (g, k) in enumerate(zip(speeds, kernels, strict=True))]
    assert kept == [True, True, False, True, True]  # 0 GFLOPS (refused) is never kept; 7 then 8 replace 5, 7
    assert sorted(finalists.kernels) == ["1", "4"] and [k.closed for k in kernels] == [1, 0, 0, 1, 0]
    finalists.close()
    assert [k.closed for k in kernels] == [1, 1, 0, 1, 1] and not finalists.offer("5", 99.0, Kernel())


def test_a_large_contraction_on_threads_is_timed_on_each_threads_share(monkeypatch):
    from optserve.policies.tiles import WIDE_TILES

    measured = record_measured(monkeypatch)
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 2048, "k": 2048, "n": 2048})
    one = schedule_nest(spec, "policy_tiles", time_limit_s=5.0, threads=1)
    assert one.timed_sizes == {"m": 256, "k": 2048, "n": 256}
    measured.clear()
    sixteen = schedule_nest(spec, "policy_tiles", time_limit_s=5.0, threads=16)
    assert sixteen.timed_sizes == {"m": 1024, "k": 2048, "n": 1024}  # 16 x the FLOPs of one thread's
    mid = LoopNestSpec.parse(KINDS["matmul"], {"m": 1000, "k": 1000, "n": 1000})
    measured.clear()
    whole = schedule_nest(mid, "policy_tiles", time_limit_s=5.0, threads=16)
    assert whole.timed_sizes == mid.size_of  # within 16 threads' share: timed whole, the wide tiles first
    first = tiled_schedule(mid, WIDE_TILES[0], host_target().vector_widths[0])
    assert measured[0].compute_key() == first.compute_key()
