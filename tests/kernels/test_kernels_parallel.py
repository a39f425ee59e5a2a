"""Parallel kernels: cells of one or two output indices on threads give numpy's answer for every kind and
tail."""

from __future__ import annotations

import numpy as np
import pytest

from optserve.kernels import team
from optserve.kernels.codegen import Target
from optserve.kernels.jit import host_target
from optserve.kernels.parallel import (
    Grid,
    ParallelKernel,
    check_parallel,
    compile_parallel,
    plan_blocks,
    restrict,
)
from optserve.kernels.reference import numpy_program
from optserve.kernels.schedule import Schedule
from optserve.kernels.spec import LoopNestSpec, SpecError
from optserve.kernels.tiling import TileTemplate, tiled_schedule
from optserve.looptune_training.suites import KINDS

# sizes with tails everywhere (no multiple of a vector, of a register tile or of a thread count)
SIZES = {
    "matmul": {"m": 37, "k": 29, "n": 53},
    "matmul_at": {"m": 45, "k": 19, "n": 70},
    "matmul_bt": {"m": 51, "k": 35, "n": 43},
    "batched": {"b": 3, "m": 21, "k": 17, "n": 39},
    "matvec": {"m": 77, "k": 41},
    "vecmat": {"n": 83, "k": 23},
    "conv_nchw": {"n": 2, "f": 11, "c": 5, "y": 13, "x": 17, "r": 3, "s": 3},
    "conv_nhwc": {"n": 1, "y": 15, "x": 9, "c": 6, "f": 21, "r": 3, "s": 2},
    "matmul_tt": {"m": 33, "k": 27, "n": 49},
}
TEMPLATES = [TileTemplate(4, 2, k_block=16, r_block=16), TileTemplate(6, 1, v_block=1, order="vr")]


def _operands(spec: LoopNestSpec, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, spec.shape(t)).astype(np.float32) for t in spec.tensors]


def _schedules(spec: LoopNestSpec) -> list[Schedule]:
    width = host_target().vector_widths[0]
    out = [Schedule.base(spec)]
    for template in TEMPLATES:
        for pack in (True, False):
            template = TileTemplate(**{**template.__dict__, "pack": pack})
            out.append(tiled_schedule(spec, template, width))
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("threads", "native"), [(2, True), (3, True), (5, True), (6, False)])
def test_every_kind_on_threads_matches_numpy(kind, threads, native):
    spec = LoopNestSpec.parse(KINDS[kind], SIZES[kind])
    out, lhs, rhs = _operands(spec)
    _, program = numpy_program(spec)
    expected = out + program(lhs, rhs)
    for schedule in _schedules(spec):
        kernel = compile_parallel(spec, schedule, threads, min_block_work=1, native=native)
        try:
            assert isinstance(kernel, ParallelKernel), schedule.text()
            assert 2 <= kernel.threads <= threads
            assert kernel.native == (native and team.native_available())
            got = out.copy()
            kernel(got, lhs, rhs)
            np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4, err_msg=schedule.text())
            kernel.run_repeated(got, lhs, rhs, 3)  # repeated calls accumulate, and do not crash
        finally:
            kernel.close()


@pytest.mark.parametrize("native", [True, False])
def test_an_oversubscribed_host_runs_every_cell_on_the_calling_thread(native, monkeypatch):
    monkeypatch.setattr(team, "OVERSUBSCRIBED", -1.0)  # any load
    monkeypatch.setattr(team, "_load_checked", [0.0, False])
    spec = LoopNestSpec.parse(KINDS["matmul_bt"], {"m": 96, "k": 40, "n": 96})
    schedule = tiled_schedule(spec, TileTemplate(6, 1, pack=True), host_target().vector_widths[0])
    out, lhs, rhs = _operands(spec)
    kernel = compile_parallel(spec, schedule, 4, min_block_work=1, native=native)
    try:
        assert team.oversubscribed()
        got = out.copy()
        kernel(got, lhs, rhs)  # packing phase, then the nests: in order on one thread
        np.testing.assert_allclose(got, out + lhs @ rhs.T, rtol=2e-4, atol=2e-4)
    finally:
        kernel.close()


def test_blocks_cover_the_index_once_in_whole_register_tiles():
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 1000, "k": 64, "n": 64})
    schedule = tiled_schedule(spec, TileTemplate(6, 4), 16)
    grid = plan_blocks(spec, schedule, 4, min_block_work=1)
    assert grid.indices == ("m",)
    blocks = grid.cuts[0][1]
    assert [b.start for b in blocks] == [0, 252, 504, 756] and blocks[-1].size == 244
    block_spec = spec.block("m", 252)
    restricted = restrict(schedule, block_spec, "m", 252)
    restricted.check(block_spec)
    assert [lp for lp in restricted.compute if lp.index != "m"] == [
        lp for lp in schedule.compute if lp.index != "m"
    ]


def test_a_large_matmul_is_cut_along_both_output_indices():
    # 16 strips of rows would each read all of B; a 4 x 4 grid's cells read a quarter of it
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 2048, "k": 2048, "n": 2048})
    schedule = tiled_schedule(spec, TileTemplate(12, 1), 16)
    grid = plan_blocks(spec, schedule, 16)
    assert grid.indices == ("m", "n") and grid.threads == 16
    for index, blocks in grid.cuts:
        assert sum(b.size for b in blocks) == 2048
        assert all(b.size % (12 if index == "m" else 16) == 0 for b in blocks[:-1])


def test_cells_that_read_the_same_columns_of_b_share_one_packed_copy():
    # A·B^T vectorized along n packs B (as B'[k,n]); the cells of one column of the grid read the same part
    spec = LoopNestSpec.parse(KINDS["matmul_bt"], {"m": 96, "k": 40, "n": 96})
    schedule = tiled_schedule(spec, TileTemplate(6, 1, pack=True), host_target().vector_widths[0])
    out, lhs, rhs = _operands(spec)
    kernel = compile_parallel(spec, schedule, 4, min_block_work=1)
    try:
        assert isinstance(kernel, ParallelKernel) and len(kernel.grid.indices) == 2
        columns = len(dict(kernel.grid.cuts)["n"])
        assert len(kernel.buffers) == columns < kernel.threads  # one copy per column of cells
        got = out.copy()
        kernel(got, lhs, rhs)
        np.testing.assert_allclose(got, out + lhs @ rhs.T, rtol=2e-4, atol=2e-4)
    finally:
        kernel.close()


def test_a_matvec_that_streams_megabytes_runs_on_threads():
    spec = LoopNestSpec.parse(KINDS["matvec"], {"m": 2048, "k": 2048})
    grid = plan_blocks(spec, Schedule.base(spec), 16, min_block_work=2**20)
    assert grid is not None and grid.threads == 16


def test_a_grid_is_never_more_cells_than_threads():
    spec = LoopNestSpec.parse(
        KINDS["conv_nchw"], {"n": 1, "f": 64, "c": 64, "y": 56, "x": 56, "r": 3, "s": 3}
    )
    schedule = tiled_schedule(spec, TileTemplate(4, 4, k_block=64, r_block=64), 16)
    for threads in (2, 3, 7, 16):
        grid = plan_blocks(spec, schedule, threads, min_block_work=1)
        assert isinstance(grid, Grid) and 2 <= grid.threads <= threads


@pytest.mark.parametrize("threads", [1, 4])
def test_the_code_size_check_refuses_what_compiling_refuses(threads):
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 1000, "k": 64, "n": 1000})
    schedule = tiled_schedule(spec, TileTemplate(6, 4), 16)
    check_parallel(spec, schedule, threads, host_target())  # fits: no error, nothing compiled
    tiny = Target(vector_widths=(16, 8), accumulator_registers=28, max_total_statements=4)
    with pytest.raises(SpecError, match="straight-line code"):
        check_parallel(spec, schedule, threads, tiny)
    with pytest.raises(SpecError, match="straight-line code"):
        compile_parallel(spec, schedule, threads, target=tiny)


def test_small_contractions_run_on_one_thread():
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 16, "k": 16, "n": 16})
    kernel = compile_parallel(spec, Schedule.base(spec), 8)
    assert not isinstance(kernel, ParallelKernel)
    kernel.close()


def test_a_block_reads_the_whole_tensors_strides():
    spec = LoopNestSpec.parse(KINDS["matmul"], {"m": 8, "k": 4, "n": 32})
    block = spec.block("n", 16)
    assert block.shape(block.output) == (8, 16) and block.layout_shape(block.output) == (8, 32)
    assert block.strides(block.output)["m"] == 32 and block.flops == spec.flops // 2


def _packed_bt(threads: int, m: int = 96):
    spec = LoopNestSpec.parse(KINDS["matmul_bt"], {"m": m, "k": 40, "n": 96})
    schedule = tiled_schedule(spec, TileTemplate(6, 1, pack=True), host_target().vector_widths[0])
    return spec, compile_parallel(spec, schedule, threads, min_block_work=1)


@pytest.mark.parametrize("claim_cells", [team.CLAIM_CELLS, 0])  # the claiming team, else OpenMP's
def test_both_native_teams_give_numpys_answer_call_after_call(claim_cells, monkeypatch):
    monkeypatch.setattr(team, "CLAIM_CELLS", claim_cells)
    monkeypatch.setattr(team, "OVERSUBSCRIBED", 1e9)  # a team whatever the load
    monkeypatch.setattr(team, "_load_checked", [0.0, False])
    spec, kernel = _packed_bt(5)
    out, lhs, rhs = _operands(spec)
    try:
        assert isinstance(kernel, ParallelKernel) and kernel.native == team.native_available()
        for _ in range(200):  # packs, then nests reading them: each call's phases in order
            got = np.zeros_like(out)
            kernel(got, lhs, rhs)
            np.testing.assert_allclose(got, lhs @ rhs.T, rtol=2e-4, atol=2e-4)
    finally:
        kernel.close()


def test_the_claiming_team_serves_callers_on_several_threads_and_wakes_sleeping_workers(monkeypatch):
    """A second caller while the team is busy runs its cells itself; workers that went to sleep (no
    spinning at all) are woken for the next call; every answer is numpy's."""
    import threading

    claiming = team._claiming_team()
    if claiming is None:
        pytest.skip("no claiming team on this host")
    monkeypatch.setattr(team, "OVERSUBSCRIBED", 1e9)
    monkeypatch.setattr(team, "_load_checked", [0.0, False])
    claiming.state[7] = 0  # workers sleep as soon as they find nothing to claim
    kernels = [_packed_bt(threads, m) for threads, m in ((3, 96), (4, 130), (2, 61))]
    failures: list[str] = []

    def caller(spec, kernel) -> None:
        out, lhs, rhs = _operands(spec)
        for _ in range(100):
            got = np.zeros_like(out)
            kernel(got, lhs, rhs)
            if not np.allclose(got, lhs @ rhs.T, rtol=2e-4, atol=2e-4):
                failures.append(str(spec))

    try:
        threads = [threading.Thread(target=caller, args=pair) for pair in kernels]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not failures and not any(thread.is_alive() for thread in threads)
    finally:
        claiming.state[7] = team.SPIN_PAUSES
        for _, kernel in kernels:
            kernel.close()


def test_a_forked_child_starts_workers_of_its_own(monkeypatch):
    """The parent's workers are not in a forked child: its first call starts its own and answers right."""
    import os

    if team._claiming_team() is None:
        pytest.skip("no claiming team on this host")
    monkeypatch.setattr(team, "OVERSUBSCRIBED", 1e9)
    monkeypatch.setattr(team, "_load_checked", [0.0, False])
    spec, kernel = _packed_bt(3)
    out, lhs, rhs = _operands(spec)
    try:
        kernel(np.zeros_like(out), lhs, rhs)  # the parent's workers exist now
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's outcome is its exit status
            status = 1
            try:
                got = np.zeros_like(out)
                kernel(got, lhs, rhs)
                status = 0 if np.allclose(got, lhs @ rhs.T, rtol=2e-4, atol=2e-4) else 2
            finally:
                os._exit(status)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert team._claiming_team().pid == os.getpid()
    finally:
        kernel.close()
