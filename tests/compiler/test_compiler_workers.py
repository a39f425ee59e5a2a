"""optserve.compiler.workers: crash-isolated, time-limited candidate evaluation in worker processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from optserve.compiler import workers
from optserve.compiler.interface import Outcome, WorkerCrashedError, llvm_failure
from optserve.compiler.pipeline import evaluate
from optserve.compiler.workers import CompilerPool, PoolBrokenError
from optserve.deadline import Deadline, StoppedError
from optserve.testing.polling import poll

CANDIDATES = [("-Oz",), ("-O2", "instcombine"), ("sroa", "simplifycfg"), (), ("-O1", "loop-rotate", "dce")]


@pytest.fixture(scope="module")
def pool():
    with CompilerPool(processes=2, timeout_s=30) as shared:
        yield shared


def test_pool_results_equal_in_process_evaluation_in_order(pool, c_ir):
    for objective in ("instruction_count", "text_size"):
        results = pool.evaluate(c_ir["structs"], CANDIDATES, objective)
        expected = [evaluate(c_ir["structs"], candidate, objective) for candidate in CANDIDATES]
        assert [r.pass_list for r in results] == [tuple(c) for c in CANDIDATES]
        assert [r.cost for r in results] == [e.cost for e in expected]


def test_pool_switches_between_modules(pool, c_ir):
    for name in ("loops", "switch", "loops"):
        assert (
            pool.evaluate(c_ir[name], [("-Oz",)], "instruction_count")[0].cost
            == evaluate(c_ir[name], ("-Oz",), "instruction_count").cost
        )


def test_pool_returns_ir_and_object_code_on_request(pool, c_ir):
    (result,) = pool.evaluate(c_ir["switch"], [("-Oz",)], "text_size", want_ir=True, want_object=True)
    assert result.optimized_ir.startswith("; ModuleID") and result.object_code.startswith(b"\x7fELF")


def test_bad_candidates_are_errors_not_exceptions(pool, c_ir):
    good, bad = pool.evaluate(c_ir["loops"], [("-Oz",), ("dce", "-Oz")], "instruction_count")
    assert good.ok and bad.cost is None and "must come first" in bad.error


def test_killing_a_worker_mid_evaluation_fails_only_that_candidate(c_ir, heavy_ir):
    with CompilerPool(processes=1, timeout_s=120) as single:
        before = single.worker_pids()
        outcome = {}
        thread = threading.Thread(
            target=lambda: outcome.update(
                results=single.evaluate(heavy_ir, [("-O3",), ()], "instruction_count")
            )
        )
        thread.start()
        deadline = time.monotonic() + 30
        while not single.busy_worker_pids() and time.monotonic() < deadline:
            time.sleep(0.005)
        (busy,) = single.busy_worker_pids()
        os.kill(busy, signal.SIGKILL)
        thread.join(timeout=120)
        killed, after_kill = outcome["results"]
        assert killed.cost is None and "was killed by SIGKILL" in killed.error
        assert after_kill.ok and after_kill.cost == evaluate(heavy_ir, (), "instruction_count").cost
        assert single.worker_pids() != before and single.replaced_workers == 1
        # The pool keeps working for the next caller.
        assert single.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count")[0].ok


def test_a_real_llvm_abort_fails_only_that_candidate(c_sources, compile_c):
    ir = compile_c(c_sources["loops"].parent / "llvm_abort" / "loop_reduce_lcssa.c")
    with CompilerPool(processes=1, timeout_s=60) as pool:
        aborted, fine = pool.evaluate(ir, [("sroa", "loop-reduce"), ("sroa",)], "instruction_count")
        assert aborted.cost is None and "was killed by SIGABRT" in aborted.error
        assert fine.cost == evaluate(ir, ("sroa",), "instruction_count").cost
        assert pool.replaced_workers == 1


def test_a_unit_with_inline_asm_and_a_target_attribute_compiles_and_runs_right(
    pool, c_sources, compile_c, tmp_path
):
    """Real units with cpuid in inline asm and a `target("sse4.1,pclmul")` function (xz-utils' crc64_fast.c,
    nettle-benchmark.c) aborted the worker: LLVM assembles inline asm with the asm parser, which the
    service did not initialize. The object must keep both the asm and the per-function features, and run."""
    ir = compile_c(c_sources["loops"].parent / "cpu_dispatch" / "crc_dispatch.c")
    (result,) = pool.evaluate(ir, [("-Oz",)], "text_size", want_object=True)
    assert result.ok, result.error
    cpuid, pclmulqdq = b"\x0f\xa2", b"\x66\x0f\x3a\x44"
    assert cpuid in result.object_code and pclmulqdq in result.object_code
    (tmp_path / "unit.o").write_bytes(result.object_code)
    subprocess.run(["clang-19", "unit.o", "-o", "unit"], cwd=tmp_path, check=True)
    run = subprocess.run([str(tmp_path / "unit")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "fold c1d6c62c5a88e0bf agrees\n"


def test_a_worker_that_llvm_stops_says_why(pool):
    """LLVM ends the process on some errors (here: inline asm its assembler rejects) with the reason on
    stderr only; the candidate's error carries that reason, not just the exit status."""
    ir = 'define void @f() {\n  call void asm sideeffect "notaninstruction", ""()\n  ret void\n}\n'
    (result,) = pool.evaluate(ir, [("-Oz",)], "text_size")
    assert result.error.startswith(workers.CRASHED) and "exited with status 1" in result.error
    assert "invalid instruction mnemonic 'notaninstruction'" in result.error


def _kill_the_idle_worker(pool: CompilerPool) -> int:
    """SIGKILL the pool's one (idle) worker and wait until it is a zombie: dead, not yet reaped."""
    (pid,) = pool.worker_pids()
    os.kill(pid, signal.SIGKILL)
    poll(lambda: Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z", 10, "a zombie", every_s=0.01)
    return pid


def test_a_worker_that_died_while_idle_is_replaced_before_use(c_ir):
    with CompilerPool(processes=1, timeout_s=60) as pool:
        pid = _kill_the_idle_worker(pool)
        (result,) = pool.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count")
        assert result.ok and pool.replaced_workers == 1 and pool.worker_pids() != [pid]


def test_a_worker_that_died_while_idle_is_reaped_and_replaced_by_the_health_check(c_ir):
    """Killed from outside while idle, a worker is reaped and replaced by the next health check (every few
    seconds in the service), not left a zombie child until a call takes it."""
    with CompilerPool(processes=1, timeout_s=60) as pool:
        pid = _kill_the_idle_worker(pool)
        pool.check_health()
        assert not Path(f"/proc/{pid}").exists()  # reaped
        # its successor starts in a thread of its own
        poll(lambda: pool.worker_pids() not in ([], [pid]), 10, "the successor worker", every_s=0.01)
        assert pool.replaced_workers == 1 and len(pool.worker_pids()) == 1 and pool.worker_pids() != [pid]
        (result,) = pool.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count")
        assert result.ok
        pool.check_health()


def test_a_candidate_over_the_time_limit_times_out_and_the_worker_is_replaced(c_ir, heavy_ir):
    with CompilerPool(processes=1, timeout_s=0.3) as strict:
        (slow,) = strict.evaluate(heavy_ir, [("-O3",)], "instruction_count")  # takes over a second
        assert slow.cost is None and slow.error == "timed out: compiling took longer than 0.3 s"
        assert strict.replaced_workers == 1
        (fast,) = strict.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count")
        assert fast.cost == evaluate(c_ir["switch"], ("-Oz",), "instruction_count").cost


def test_cancelling_a_call_stops_its_candidates_running_or_not(c_ir, heavy_ir):
    """A service request cut by its deadline cancels its compile call: neither the candidate compiling nor
    those still queued may keep the workers (and the build's CPUs) busy after the answer went out."""
    with CompilerPool(processes=1, timeout_s=120) as single:

        async def cancel_after_the_first_starts():
            call = asyncio.ensure_future(single.evaluate_async(heavy_ir, [("-O3",)] * 6, "instruction_count"))
            while not single.busy_worker_pids():
                await asyncio.sleep(0.005)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call

        started = time.monotonic()
        asyncio.run(cancel_after_the_first_starts())
        (after,) = single.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count")
        one_compile = evaluate(heavy_ir, ("-O3",), "instruction_count").seconds
        assert after.ok and single.replaced_workers == 1  # the running compile's worker was stopped
        # Neither the started candidate nor the five others ran to their end.
        assert time.monotonic() - started < one_compile + 1.0


def test_at_its_deadline_a_call_stops_its_running_candidates_and_starts_no_more(c_ir, heavy_ir):
    """Two workers, six candidates of about a second each, a deadline 0.3 s away: the call returns at the
    deadline, the two running candidates stopped and four never started; the pool is whole again soon."""
    with CompilerPool(processes=2, timeout_s=120) as pool:
        started = time.monotonic()
        results = pool.evaluate(
            heavy_ir, [("-O3",)] * 6, "instruction_count", deadline=Deadline(started + 0.3)
        )
        returned_s = time.monotonic() - started
        assert [r.error for r in results].count(workers.DEADLINE_STOPPED) == 2
        assert [r.error for r in results].count(workers.DEADLINE_NOT_STARTED) == 4
        assert {r.outcome for r in results} == {Outcome.DEADLINE}
        assert returned_s < 0.3 + 0.2, returned_s  # the stop does not wait for the workers' restart
        assert pool.replaced_workers == 2
        _wait_for(lambda: pool.idle_workers() == 2, 10.0)
        assert pool.busy_worker_pids() == []
        (after,) = pool.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count", deadline=Deadline.after(30))
        assert after.ok and after.cost == evaluate(c_ir["switch"], ("-Oz",), "instruction_count").cost


def test_a_call_whose_deadline_has_passed_compiles_nothing(pool, c_ir):
    replaced = pool.replaced_workers
    results = pool.evaluate(c_ir["loops"], CANDIDATES, "instruction_count", deadline=Deadline.after(0))
    assert [r.error for r in results] == [workers.DEADLINE_NOT_STARTED] * len(CANDIDATES)
    assert pool.replaced_workers == replaced and pool.busy_worker_pids() == []


def test_a_deadline_that_leaves_time_changes_nothing(pool, c_ir):
    results = pool.evaluate(c_ir["structs"], CANDIDATES, "instruction_count", deadline=Deadline.after(60))
    assert [r.cost for r in results] == [
        evaluate(c_ir["structs"], c, "instruction_count").cost for c in CANDIDATES
    ]


def test_a_call_waiting_for_a_busy_pool_ends_at_its_deadline(c_ir, heavy_ir):
    """The pool's one worker is another caller's: a second call with a deadline does not wait past it."""
    with CompilerPool(processes=1, timeout_s=120) as single:
        other = threading.Thread(target=single.evaluate, args=(heavy_ir, [("-O3",)] * 3, "instruction_count"))
        other.start()
        _wait_for(lambda: single.busy_worker_pids() != [], 30.0)
        started = time.monotonic()
        (late,) = single.evaluate(
            c_ir["switch"], [("-Oz",)], "instruction_count", deadline=Deadline(started + 0.2)
        )
        assert late.error == workers.DEADLINE_NOT_STARTED and time.monotonic() - started < 0.2 + 0.2
        other.join(timeout=120)


def _wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)  # polling the pool's state, bounded by the timeout


def test_concurrent_callers_share_the_pool(pool, c_ir):
    results = {}

    def run(name):
        results[name] = pool.evaluate(c_ir[name], CANDIDATES, "instruction_count")

    threads = [threading.Thread(target=run, args=(name,)) for name in ("loops", "switch", "recursion")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, evaluations in results.items():
        assert [e.cost for e in evaluations] == [
            evaluate(c_ir[name], c, "instruction_count").cost for c in CANDIDATES
        ]


def test_async_variant(pool, c_ir):
    async def both():
        return await asyncio.gather(
            pool.evaluate_async(c_ir["loops"], [("-Oz",)], "instruction_count"),
            pool.evaluate_async(c_ir["switch"], [("-Oz",)], "text_size"),
        )

    loops, switch = asyncio.run(both())
    assert loops[0].cost == evaluate(c_ir["loops"], ("-Oz",), "instruction_count").cost
    assert switch[0].cost == evaluate(c_ir["switch"], ("-Oz",), "text_size").cost


def test_closed_pool_refuses_work_and_stops_its_processes(c_ir):
    pool = CompilerPool(processes=1, timeout_s=10)
    (pid,) = pool.worker_pids()
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.evaluate(c_ir["loops"], [("-Oz",)], "instruction_count")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_workers_run_under_a_memory_limit(c_ir):
    with CompilerPool(processes=1, timeout_s=60, memory_limit_mb=2048) as limited:
        (ok,) = limited.evaluate(c_ir["loops"], [("-O2",)], "instruction_count")
        assert ok.cost == evaluate(c_ir["loops"], ("-O2",), "instruction_count").cost


def test_running_out_of_memory_fails_the_candidate_not_the_pool(c_ir):
    # The address-space limit is set once the worker has loaded LLVM, so it starts, then cannot allocate.
    with CompilerPool(processes=1, timeout_s=60, memory_limit_mb=32) as starved:
        first, second = starved.evaluate(c_ir["loops"], [("-O2",), ("-Oz",)], "text_size")
        assert first.cost is None and second.cost is None
        assert "compiler worker crashed" in first.error
        assert starved.replaced_workers == 2


def test_a_pool_that_cannot_restart_a_worker_says_so(monkeypatch, c_ir):
    """Its calls fail with PoolBrokenError instead of waiting for a worker that never comes, and its health
    check fails (Ray Serve then replaces the replica that owns it)."""
    with CompilerPool(processes=1, timeout_s=30) as broken:
        broken.check_health()
        monkeypatch.setattr(workers.sys, "executable", "/bin/false")  # new workers exit at once
        os.kill(broken.worker_pids()[0], signal.SIGKILL)
        with pytest.raises(PoolBrokenError, match="did not start"):
            broken.evaluate(c_ir["structs"], [("-Oz",)], "instruction_count")
        with pytest.raises(PoolBrokenError, match="1 of 1 compiler workers"):
            broken.check_health()


def test_a_standby_worker_takes_the_place_of_one_stopped_at_a_deadline_at_once(c_ir, heavy_ir):
    """One worker and one on standby: the worker stopped at the call's deadline is replaced by the standby
    one before the call returns (no process start to wait for), and a new standby one starts behind it."""
    with CompilerPool(processes=1, timeout_s=120, standby=1) as pool:
        before = pool.worker_pids()
        (cut,) = pool.evaluate(heavy_ir, [("-O3",)], "instruction_count", deadline=Deadline.after(0.3))
        assert cut.error == workers.DEADLINE_STOPPED
        assert pool.idle_workers() == 1 and pool.worker_pids() != before  # ready at once
        pool.check_health()
        _wait_for(lambda: pool.standby_workers() == 1, 30.0)
        (after,) = pool.evaluate(c_ir["switch"], [("-Oz",)], "instruction_count")
        assert after.ok and after.cost == evaluate(c_ir["switch"], ("-Oz",), "instruction_count").cost


def test_a_standby_worker_replaces_one_that_died_and_close_stops_the_standby_too(c_ir):
    with CompilerPool(processes=1, timeout_s=30, standby=1) as pool:
        (pid,) = pool.worker_pids()
        os.kill(pid, signal.SIGKILL)
        _wait_for(lambda: Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z", 10.0)  # dead
        (result,) = pool.evaluate(c_ir["structs"], [("-Oz",)], "instruction_count")
        assert result.ok and pool.replaced_workers == 1 and pool.worker_pids() != [pid]
        _wait_for(lambda: pool.standby_workers() == 1, 30.0)
        standby = [w.process for w in pool._standby]
    assert all(process.poll() is not None for process in standby)  # closed: no process left behind


def test_workers_write_no_core_file():
    """RLIMIT_CORE 0 in every worker, whatever the parent allows (here raised to its hard limit)."""
    import resource

    import psutil

    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    try:
        with CompilerPool(processes=1, timeout_s=30, standby=1) as pool:
            pids = pool.worker_pids() + [w.pid for w in pool._standby]
            assert [psutil.Process(pid).rlimit(psutil.RLIMIT_CORE) for pid in pids] == [(0, 0), (0, 0)]
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


_ORPHANING_PARENT = """
import sys, threading, time
from optserve.compiler.workers import CompilerPool

pool = CompilerPool(processes=1, timeout_s=600)
first = pool._take_idle(None)
# its successor is started by a thread of the pool that then ends: it must live on while this process does
threading.Thread(target=pool._restart_in_background, args=(first,)).start()
while pool.idle_workers() < 1:
    time.sleep(0.01)
time.sleep(0.5)
ir = open(sys.argv[1]).read()
threading.Thread(target=pool.evaluate, args=(ir, [("-O3",)] * 20, "instruction_count"), daemon=True).start()
while not pool.busy_worker_pids():
    time.sleep(0.01)
print(*pool.busy_worker_pids(), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_whose_parent_is_sigkilled_stops_within_a_second(compile_c, tmp_path):
    """A replica SIGKILLed mid-compile leaves no worker compiling on: the orphaned worker gets SIGKILL (a
    compile of this module takes seconds, so the worker would not notice on its own)."""
    loops = [
        f"  for (int i = 0; i < n; i++) {{ a[i] = a[i] * {k + 1}.5f + b[(i * {k % 7 + 1}) % n];"
        f" s += a[i] / (b[i] + {k}.0f); }}"
        for k in range(600)
    ]
    source = tmp_path / "slow.c"
    source.write_text("\n".join(["float f(float *a, float *b, int n) {", "  float s = 0;", *loops]))
    source.write_text(source.read_text() + "\n  return s;\n}\n")
    module = tmp_path / "slow.ll"
    module.write_text(compile_c(source))
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHANING_PARENT, str(module)], stdout=subprocess.PIPE, text=True
    )
    try:
        (busy,) = (int(pid) for pid in parent.stdout.readline().split())
        assert _alive(busy)
    finally:
        parent.kill()
        parent.wait()
    killed_at = time.monotonic()
    while _alive(busy) and time.monotonic() - killed_at < 1.0:
        time.sleep(0.01)
    alive = _alive(busy)
    if alive:
        os.kill(busy, signal.SIGKILL)
    assert not alive, "the orphaned worker was still compiling a second after its parent died"


def test_llvm_failing_on_the_module_is_told_from_other_failures(pool, c_ir):
    """`llvm_failure` gives LLVM's own message where LLVM stopped on the module itself (its assertion in
    SimplifyCFG on a 1,500-block chain, its assembler's error on bad inline asm): the input's fault, which
    the service answers INVALID_ARGUMENT; a worker killed from outside is not, nor a success."""
    from tests.reliability.reliability_inputs import many_blocks

    bad_asm = 'define void @f() {\n  call void asm sideeffect "notaninstruction", ""()\n  ret void\n}\n'
    (aborted,) = pool.evaluate(many_blocks(1500), [("-Oz",)], "text_size")
    (refused,) = pool.evaluate(bad_asm, [("-Oz",)], "text_size")
    (fine,) = pool.evaluate(c_ir["structs"], [("-Oz",)], "text_size")
    assert "was killed by SIGABRT" in aborted.error
    assert "Iterative simplification didn't converge!" in llvm_failure(aborted)
    assert "SimplifyCFGPass.cpp" in llvm_failure(aborted)
    assert "invalid instruction mnemonic 'notaninstruction'" in llvm_failure(refused)
    assert llvm_failure(fine) is None


def test_a_worker_killed_from_outside_is_no_llvm_failure(c_ir, heavy_ir):
    with CompilerPool(processes=1, timeout_s=120) as single:
        outcome = {}
        thread = threading.Thread(
            target=lambda: outcome.update(results=single.evaluate(heavy_ir, [("-O3",)], "instruction_count"))
        )
        thread.start()
        _wait_for(lambda: bool(single.busy_worker_pids()), 30.0)
        os.kill(single.busy_worker_pids()[0], signal.SIGKILL)
        thread.join(timeout=120)
        (killed,) = outcome["results"]
        assert "was killed by SIGKILL" in killed.error and llvm_failure(killed) is None


def test_a_job_runs_in_a_worker_and_gives_back_its_value_or_its_error(pool, c_ir):
    """The service's intake (`run`): the job's value as in process, an exception it raised as itself."""
    from optserve.compiler.ir import IRError, parse_ir

    assert pool.run(parse_ir, c_ir["structs"], 10**7) == parse_ir(c_ir["structs"], 10**7)
    assert asyncio.run(pool.run_async(os.getpid)) in pool.worker_pids()  # not this process
    with pytest.raises(IRError, match="does not parse"):
        pool.run(parse_ir, "define i32 @f( {", 10**7)


def test_a_job_that_crashes_its_worker_is_an_error_and_the_worker_is_replaced(c_ir):
    """An input that aborts LLVM ends one worker: the caller gets WorkerCrashedError saying how, the pool
    replaces the worker and keeps working."""
    with CompilerPool(processes=1, timeout_s=30) as pool:
        before = pool.worker_pids()
        with pytest.raises(WorkerCrashedError) as crashed:
            pool.run(os.abort)
        assert crashed.value.signal_name == "SIGABRT" and not crashed.value.killed_from_outside
        assert "SIGABRT" in str(crashed.value)
        assert pool.run(len, "abc") == 3
        assert pool.worker_pids() != before


def test_a_job_is_stopped_at_its_deadline_and_its_worker_restarted(c_ir):
    with CompilerPool(processes=1, timeout_s=30) as pool:
        started = time.monotonic()
        with pytest.raises(StoppedError, match="deadline"):
            pool.run(time.sleep, 20, deadline=Deadline(started + 0.3))
        assert time.monotonic() - started < 5
        assert pool.run(len, "ab") == 2  # a fresh worker, not the one still sleeping


def _busy_worker(pool: CompilerPool, seconds: float) -> threading.Thread:
    """Keep the pool's one worker busy for `seconds` (a job in a thread); returned once it runs."""
    thread = threading.Thread(target=pool.run, args=(time.sleep, seconds))
    thread.start()
    _wait_for(lambda: pool.busy_worker_pids() != [], 30.0)
    return thread


def _two_jobs_wall_s(pool: CompilerPool, seconds: float) -> float:
    started = time.monotonic()
    threads = [threading.Thread(target=pool.run, args=(time.sleep, seconds)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return time.monotonic() - started


def test_a_burst_process_runs_a_second_job_beside_the_busy_worker_and_none_serializes():
    """One worker and one burst process: two jobs submitted together take the time of one. The burst
    process starts on the first job that found the worker busy (none while the pool idles); with burst 0
    the second job waits for the first."""
    job_s = 1.5
    with CompilerPool(processes=1, timeout_s=30, burst=1) as pool:
        assert pool.burst_worker_pids() == []  # lazy: an idle pool holds no burst process
        _two_jobs_wall_s(pool, 0.2)  # the first overflow starts it
        _wait_for(lambda: len(pool.burst_worker_pids()) == 1, 30.0)
        together = _two_jobs_wall_s(pool, job_s)
        assert together < 1.5 * job_s, together
        assert pool.busy_worker_pids() == [] and pool.idle_workers() == 1
        (burst,) = pool.burst_worker_pids()
        assert burst not in pool.worker_pids()
        # a lone job takes the worker, not the burst process
        assert pool.run(os.getpid) == pool.worker_pids()[0]
    assert not _alive(burst)  # close stops burst processes
    with CompilerPool(processes=1, timeout_s=30) as serial:
        alone = _two_jobs_wall_s(serial, job_s)
        assert alone >= 2 * job_s, alone
        assert serial.burst_worker_pids() == []


def test_a_burst_process_compiles_candidates_under_the_same_limits(c_ir):
    """Candidates of one call beyond the busy worker go to the burst process, which runs under the pool's
    memory limit and gives the same results."""
    import psutil

    with CompilerPool(processes=1, timeout_s=30, memory_limit_mb=2048, burst=1) as pool:
        busy = _busy_worker(pool, 3.0)
        results = pool.evaluate(c_ir["structs"], CANDIDATES[:2], "instruction_count")
        expected = [evaluate(c_ir["structs"], c, "instruction_count").cost for c in CANDIDATES[:2]]
        assert [r.cost for r in results] == expected
        (burst,) = pool.burst_worker_pids()
        limit = 2048 * 1024 * 1024
        assert psutil.Process(burst).rlimit(psutil.RLIMIT_AS) == (limit, limit)
        busy.join(timeout=30)


def test_a_burst_process_stopped_at_a_deadline_or_crashing_is_handled_like_a_worker(heavy_ir):
    """With the worker taken: a job on the burst process stopped at its deadline (the call returns at
    once), one that aborts it (WorkerCrashedError), a candidate whose process is killed from outside (CRASH)
    and a job over the time limit: each ends only that process, which is reaped, and the next overflow has a
    fresh one. The worker and the standby are untouched."""
    with CompilerPool(processes=1, timeout_s=30, standby=1, burst=1) as pool:
        regular = pool.worker_pids()
        held = pool._take_idle(0)  # the worker is busy for every job below
        assert pool.run(len, "ab") == 2  # starts the burst process
        (first,) = pool.burst_worker_pids()
        started = time.monotonic()
        with pytest.raises(StoppedError, match="was stopped at the deadline"):
            pool.run(time.sleep, 20, deadline=Deadline(started + 0.5))
        assert time.monotonic() - started < 5
        _wait_for(lambda: not _alive(first) and pool.burst_worker_pids() == [], 10.0)
        with pytest.raises(WorkerCrashedError) as crashed:
            pool.run(os.abort)
        assert crashed.value.signal_name == "SIGABRT"
        assert pool.run(len, "abc") == 3  # on a fresh burst process
        outcome = {}
        thread = threading.Thread(
            target=lambda: outcome.update(results=pool.evaluate(heavy_ir, [("-O3",)], "instruction_count"))
        )
        thread.start()
        _wait_for(lambda: pool.busy_worker_pids() != [], 30.0)
        (burst,) = pool.busy_worker_pids()
        os.kill(burst, signal.SIGKILL)
        thread.join(timeout=120)
        (killed,) = outcome["results"]
        assert killed.outcome == Outcome.CRASH and "was killed by SIGKILL" in killed.error
        assert not _alive(burst) and len(pool.burst_worker_pids()) == 1  # its successor
        assert pool.worker_pids() == regular and pool.standby_workers() == 1
        assert pool.replaced_workers == 3
        pool._give_back(held)
    with CompilerPool(processes=1, timeout_s=1, burst=1) as strict:
        held = strict._take_idle(0)
        with pytest.raises(StoppedError, match="time limit"):
            strict.run(time.sleep, 10)
        strict._give_back(held)
