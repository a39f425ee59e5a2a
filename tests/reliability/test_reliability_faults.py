"""Faults through the running service: an LLVM abort, a compiler worker killed mid-request, a Serve replica
killed mid-request. Each request fails cleanly (or is answered), nothing hangs (every wait is bounded), and
the service recovers. And the result cache never answers for a different IR or model version.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import grpc
import psutil
import pytest
import ray

from optserve.clients.python.client import CallError, OptserveClient
from optserve.serve.app import APP_NAME
from optserve.testing.polling import poll as _poll
from optserve.testing.service import TOKEN, replica_pids, slow_module

LLVM_ABORT_C = Path(__file__).resolve().parent.parent / "data" / "c" / "llvm_abort" / "loop_reduce_lcssa.c"
RECOVERY_S = 180.0


def _cpu(process) -> float:
    try:
        return process.cpu_times().user
    except psutil.Error:
        return 0.0


def _compiling_worker(replica, baseline: dict[int, float]):
    """A compiler worker of `replica` that has used CPU since `baseline` was taken (it is compiling)."""
    try:
        children = replica.children()
    except psutil.Error:
        return None
    for child in children:
        if _cpu(child) - baseline.get(child.pid, 0.0) > 0.2:
            return child
    return None


def _compiler_baseline() -> dict[int, float]:
    """CPU seconds so far of every worker of every CompilerWorkers replica."""
    baseline = {}
    for pid in replica_pids("CompilerWorkers"):
        try:
            baseline.update({child.pid: _cpu(child) for child in psutil.Process(pid).children()})
        except psutil.Error:
            continue
    return baseline


def _compiling_replica(baseline: dict[int, float]):
    """(replica, worker) where a CompilerWorkers replica's worker compiles, else None. Earlier load may have
    autoscaled the deployment to several replicas, and a request's compiles go to any of them."""
    for pid in replica_pids("CompilerWorkers"):
        try:
            replica = psutil.Process(pid)
        except psutil.Error:
            continue
        worker = _compiling_worker(replica, baseline)
        if worker is not None:
            return replica, worker
    return None


def _recovered(grpc_client, ir: str) -> None:
    """A fresh (uncached) valid request is answered again, within RECOVERY_S."""

    def answered():
        try:
            answer = grpc_client.optimize(ir, bypass_cache=True, deadline_s=60)
        except CallError as err:
            assert err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED), err
            return None
        return answer.best.cost <= answer.oz_cost

    _poll(answered, RECOVERY_S, "the service to answer again")


def test_llvm_abort_is_contained_inside_the_service(rel_service, grpc_client, add_ir):
    """`sroa loop-reduce` aborts LLVM on this module: only that candidate fails, in the service's pool."""
    from ray import serve

    ir = subprocess.run(
        [
            "clang-19",
            "-O0",
            "-Xclang",
            "-disable-O0-optnone",
            "-emit-llvm",
            "-w",
            "-S",
            str(LLVM_ABORT_C),
            "-o",
            "-",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    compiler = serve.get_deployment_handle("CompilerWorkers", APP_NAME)
    aborted, fine = compiler.evaluate.remote(
        ir, [("sroa", "loop-reduce"), ("sroa",)], "instruction_count", False, False
    ).result(timeout_s=120)
    assert aborted.cost is None and "SIGABRT" in aborted.error
    assert fine.cost is not None
    answer = grpc_client.optimize(ir, bypass_cache=True, deadline_s=60)  # the whole flow, same module
    assert answer.best.cost <= answer.oz_cost
    _recovered(grpc_client, add_ir)


def test_compiler_worker_killed_mid_request(rel_service, grpc_client, add_ir):
    module = slow_module()  # -Oz alone takes seconds: the worker is busy long enough to be killed
    baseline = _compiler_baseline()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(grpc_client.optimize, module, bypass_cache=True, deadline_s=90)
        replica, victim = _poll(lambda: _compiling_replica(baseline), 120, "a compiler worker to compile")
        os.kill(victim.pid, signal.SIGKILL)
        try:
            answer = pending.result(timeout=150)
        except CallError as err:  # a clean, named failure is fine (e.g. -Oz itself was the victim)
            assert err.code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE), err
            assert "crash" in err.message or "killed" in err.message or "unavailable" in err.message, err
        else:
            assert answer.best.cost <= answer.oz_cost or answer.best.error
    # the pool reaps a killed worker in a thread of its own, not before the answer: reaped, not left a zombie
    _poll(lambda: victim.pid not in [c.pid for c in replica.children()], 30, "the killed worker to be reaped")
    _recovered(grpc_client, add_ir)


@pytest.mark.slow
def test_serve_replica_killed_mid_request(rel_service, grpc_client, add_ir):
    """SIGKILL the CompilerWorkers replica while it serves a request: the request fails cleanly
    (UNAVAILABLE) or is answered; when it was the only replica, the compiler part of readiness turns not
    ready, then ready again as Serve starts a new one (beside another replica, readiness must be ready);
    and the service answers again."""
    module = slow_module()
    baseline = _compiler_baseline()
    with ThreadPoolExecutor(1) as pool:
        ended = []

        def optimize():
            try:
                return grpc_client.optimize(module, bypass_cache=True, deadline_s=90)
            finally:
                ended.append(time.monotonic())

        pending = pool.submit(optimize)
        replica, _ = _poll(lambda: _compiling_replica(baseline), 120, "the request to compile")
        replica_pid = replica.pid
        others = [p for p in replica_pids("CompilerWorkers") if p != replica_pid]
        os.kill(replica_pid, signal.SIGKILL)
        killed = time.monotonic()
        # Its only replica gone, compiler readiness turns; beside another replica it may stay ready.
        history = [] if others else _health_history(_compiler_readiness, RECOVERY_S)
        try:
            answer = pending.result(timeout=150)
        except CallError as err:  # never DEADLINE_EXCEEDED: retries ask only for the time left (issue 21)
            assert err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL), err
            assert err.message
        else:
            assert answer.best.cost <= answer.oz_cost
        print(f"the call (with retries) ended {ended[0] - killed:.1f} s after the kill")
    if others:
        print(f"{len(others)} more CompilerWorkers replica(s) served meanwhile")
        _poll(lambda: _compiler_readiness() == "SERVING", RECOVERY_S, "compiler readiness")
    else:
        _turned_and_recovered("compiler readiness", history)
    _poll(
        lambda: [p for p in replica_pids("CompilerWorkers") if p != replica_pid], RECOVERY_S, "a new replica"
    )
    _recovered(grpc_client, add_ir)
    assert ray.is_initialized()


@pytest.mark.slow
def test_a_try_whose_compiler_replica_dies_gets_unavailable_long_before_its_deadline(
    rel_service, grpc_client, add_ir
):
    """The 1,200-function slow_module (default settings: per-function candidates on) with a 40 s deadline,
    its CompilerWorkers replica killed while it compiles: the try in flight is answered UNAVAILABLE within
    15 s of the kill, not after the rest of its candidate work at its deadline, so a client's retry still
    has the rest of its call. One try only (no client retries), to see that try's answer."""
    endpoints, _ = rel_service
    baseline = _compiler_baseline()
    with (
        OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=None) as one_try,
        ThreadPoolExecutor(1) as pool,
    ):
        sent = time.monotonic()
        pending = pool.submit(one_try.optimize, slow_module(), bypass_cache=True, deadline_s=40)
        replica, _ = _poll(lambda: _compiling_replica(baseline), 120, "the request to compile")
        replica_pid = replica.pid
        os.kill(replica_pid, signal.SIGKILL)
        killed = time.monotonic()
        try:
            answer = pending.result(timeout=60)
        except CallError as err:
            assert err.code is grpc.StatusCode.UNAVAILABLE, err
        else:
            assert answer.best.cost <= answer.oz_cost
        ended = time.monotonic()
    print(f"killed {killed - sent:.1f} s after sending, answered {ended - killed:.1f} s after the kill")
    assert ended - killed < 15.0
    _poll(
        lambda: [p for p in replica_pids("CompilerWorkers") if p != replica_pid], RECOVERY_S, "a new replica"
    )
    _recovered(grpc_client, add_ir)


MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def _turned_and_recovered(service: str, history: list[tuple[float, str]]) -> None:
    """`history` (of `_health_history`) went NOT_SERVING, then SERVING; prints when, from the kill."""
    statuses = [status for _, status in history]
    assert "NOT_SERVING" in statuses, history
    assert statuses[-1] == "SERVING", history[-5:]
    down = next(t for t, status in history if status != "SERVING")
    up = history[-1][0]
    print(f"{service}: NOT_SERVING {down:.1f} s after the kill, SERVING again {up:.1f} s after it")


def _grpc_health(grpc_client, service: str):
    """A probe: the gRPC health status of `service` (or the call's error code)."""

    def probe() -> str:
        try:
            return grpc_client.health(service)
        except CallError as err:
            return err.code.name

    return probe


def _compiler_readiness() -> str:
    """A probe: the compiler part of readiness (what gRPC health of optserve.v1.PassOrdering and
    /v2/health/ready answer with), read straight from Serve's status: gRPC health also asks the engine for its
    metadata, which waits while the engine tokenizes slow_module, longer than the replica is down."""
    from optserve.serve.replicas.readiness import READY, deployment_state, deployment_statuses

    state = deployment_state(asyncio.run(deployment_statuses(APP_NAME)), "CompilerWorkers")
    return "SERVING" if state == READY else "NOT_SERVING"


def _health_history(probe, until_s: float) -> list[tuple[float, str]]:
    """(seconds from now, status) of `probe()`, polled until it is SERVING after having been anything else,
    or `until_s` passes."""
    started, seen = time.monotonic(), []
    while time.monotonic() - started < until_s:
        seen.append((time.monotonic() - started, probe()))
        if seen[-1][1] == "SERVING" and any(s != "SERVING" for _, s in seen):
            break
        time.sleep(0.1)  # polling health, bounded by until_s
    return seen


@pytest.mark.slow
def test_looptune_replica_killed_mid_schedule(rel_service, grpc_client):
    """SIGKILL the LoopTuneScheduler replica (LoopTune's searches and kernel timing run in it) during a
    Schedule: the call gets UNAVAILABLE or an answer, never INTERNAL; gRPC health of optserve.v1.LoopTune
    turns NOT_SERVING, then SERVING again with nobody restarting anything, and Schedule answers again."""
    endpoints, _ = rel_service
    (replica_pid,) = replica_pids("LoopTuneScheduler")[:1]
    replica = psutil.Process(replica_pid)
    busy_from = _cpu(replica)
    with (
        OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=None) as one_try,
        ThreadPoolExecutor(1) as pool,
    ):
        sizes = {"m": 256, "k": 256, "n": 256}
        pending = pool.submit(one_try.schedule, MATMUL, sizes, "beam4dfs", 30.0)
        _poll(lambda: _cpu(replica) - busy_from > 1.0, 120, "the search to run")
        os.kill(replica_pid, signal.SIGKILL)
        history = _health_history(_grpc_health(grpc_client, "optserve.v1.LoopTune"), RECOVERY_S)
        try:
            pending.result(timeout=60)
        except CallError as err:
            assert err.code is grpc.StatusCode.UNAVAILABLE, err
    _turned_and_recovered("optserve.v1.LoopTune", history)
    answer = grpc_client.schedule(MATMUL, {"m": 32, "k": 32, "n": 32}, "greedy1", 2.0)
    assert answer.gflops > 0
    assert [p for p in replica_pids("LoopTuneScheduler") if p != replica_pid]


@pytest.mark.slow
def test_torch_engine_replica_killed_while_it_decodes(rel_service, grpc_client, add_ir):
    """SIGKILL the PassOrderingEngine replica (the torch backend decodes in that process) while Optimize
    calls keep it busy: each call is answered or gets UNAVAILABLE, never INTERNAL; gRPC health of
    optserve.v1.PassOrdering turns NOT_SERVING, then SERVING again as Serve replaces the replica, and
    Optimize answers again."""
    endpoints, _ = rel_service
    (replica_pid,) = replica_pids("PassOrderingEngine")[:1]
    replica = psutil.Process(replica_pid)
    busy_from = _cpu(replica)
    stop, codes = threading.Event(), []
    options = {"strategy": "priority", "samples": 20, "bypass_cache": True, "deadline_s": 30}

    def keep_it_busy():
        with OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=None) as one_try:
            while not stop.is_set():
                try:
                    one_try.optimize(add_ir, **options)
                    codes.append("OK")
                except CallError as err:
                    codes.append(err.code.name)

    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(keep_it_busy)
        _poll(lambda: _cpu(replica) - busy_from > 1.0, 120, "the engine to decode")
        os.kill(replica_pid, signal.SIGKILL)
        history = _health_history(_grpc_health(grpc_client, "optserve.v1.PassOrdering"), RECOVERY_S)
        stop.set()
        busy.result(timeout=120)
    # Never INTERNAL. UNAVAILABLE is allowed, not required: on 2 loaded cores every call, the one in flight at
    # the kill included, can be answered OK (why is an open question of issue 21).
    assert codes and set(codes) <= {"OK", "UNAVAILABLE"}, codes
    _turned_and_recovered("optserve.v1.PassOrdering", history)
    _recovered(grpc_client, add_ir)
    assert [p for p in replica_pids("PassOrderingEngine") if p != replica_pid]


RETRYABLE = {"UNAVAILABLE", "RESOURCE_EXHAUSTED"}


@pytest.mark.slow
def test_a_steady_stream_across_an_engine_replica_kill_loses_no_call(rel_service, add_ir):
    """Optimize calls sent at a steady 4 per second (open loop: a call does not wait for the one before) from
    3 s before a SIGKILL of the PassOrderingEngine replica until 3 s after calls sent after the kill are
    answered again: every call gets its answer within its deadline, OK or retryable (UNAVAILABLE,
    RESOURCE_EXHAUSTED); none is lost, hangs or gets INTERNAL. One try per call (no client retries), so the
    count is of the server's answers; a client with retries (the default) sends the refused ones again."""
    endpoints, _ = rel_service
    (replica_pid,) = replica_pids("PassOrderingEngine")[:1]
    interval_s, deadline_s = 0.25, 20.0
    calls: list[tuple[float, Future]] = []  # (sent, its (code, ended))

    def one_call() -> tuple[str, float]:
        try:
            one_try.optimize(add_ir, bypass_cache=True, deadline_s=deadline_s)
            return "OK", time.monotonic()
        except CallError as err:
            return err.code.name, time.monotonic()

    def answered_again(killed: float) -> bool:
        return any(sent > killed and f.done() and f.result()[0] == "OK" for sent, f in calls)

    with (
        OptserveClient(
            endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=None, timeout_s=deadline_s + 10
        ) as one_try,
        ThreadPoolExecutor(32) as pool,
    ):
        started = time.monotonic()
        killed = recovered = None
        while recovered is None or time.monotonic() - recovered < 3.0:
            now = time.monotonic()
            if killed is None and now - started >= 3.0:
                os.kill(replica_pid, signal.SIGKILL)
                killed = now
            if killed is not None and recovered is None and answered_again(killed):
                recovered = now
            assert killed is None or now - killed < RECOVERY_S, "calls were not answered again"
            calls.append((now, pool.submit(one_call)))
            time.sleep(interval_s)  # the stream's pace
        # Each call ends by its own timeout (deadline + 10 s) at the latest: waiting longer means it hangs.
        # (sent, code, ended), from the kill
        outcomes = [
            (sent - killed, code, ended - killed)
            for sent, f in calls
            for code, ended in [f.result(timeout=deadline_s + 30)]
        ]
    counts = Counter(code for _, code, _ in outcomes)
    refused = [sent for sent, code, _ in outcomes if code != "OK"]
    print(
        f"{len(outcomes)} calls sent over {outcomes[-1][0] - outcomes[0][0]:.1f} s: {dict(counts)}; "
        + (f"refused: sent {min(refused):.1f} to {max(refused):.1f} s from the kill; " if refused else "")
        + f"the first call sent after the kill and answered OK was sent {recovered - killed:.1f} s after it; "
        f"slowest answer {max(ended - sent for sent, _, ended in outcomes):.1f} s"
    )
    assert set(counts) <= {"OK"} | RETRYABLE, [o for o in outcomes if o[1] not in {"OK"} | RETRYABLE]
    before = [code for _, code, ended in outcomes if ended < 0]
    assert before and set(before) == {"OK"}  # the stream was answered before the kill
    assert [p for p in replica_pids("PassOrderingEngine") if p != replica_pid]  # the kill took


def test_result_cache_never_answers_for_another_ir_or_model():
    import hashlib

    from optserve.serve.optimize.answer_key import answer_key
    from optserve.serve.schemas import OptimizeRequest

    def ir_digest(text: str) -> str:  # the key's IR part: SHA-256 of the IR the compiler sees
        return hashlib.sha256(text.encode()).hexdigest()

    ir = "define i32 @f() {\n  ret i32 2\n}\n"
    request = OptimizeRequest(ir=ir)
    base = answer_key(ir_digest(ir), request, "model-aaaa")
    assert answer_key(ir_digest(ir), request, "model-aaab") != base  # same IR, other model version
    one_byte = ir.replace("2", "3")
    assert answer_key(ir_digest(one_byte), request, "model-aaaa") != base  # one byte different IR
    other_options = OptimizeRequest(ir=ir, objective="text_size")
    assert answer_key(ir_digest(ir), other_options, "model-aaaa") != base


def test_cache_misses_for_a_one_byte_different_module_in_the_service(grpc_client, add_ir):
    """Each of the two ingress replicas keeps its own result cache: of three calls with the same module, one
    is answered from a cache (the first fills one replica's; the second hits it or fills the other's)."""
    first = grpc_client.optimize(add_ir)
    cached = [r for r in [first, grpc_client.optimize(add_ir), grpc_client.optimize(add_ir)] if r.cached]
    assert cached and cached[0].ir_sha256 == first.ir_sha256
    assert cached[0].model_version == grpc_client.model_metadata().version
    changed = add_ir.replace("mul nsw i32 %add, 2", "mul nsw i32 %add, 3")
    assert changed != add_ir and len(changed) == len(add_ir)
    other = grpc_client.optimize(changed)
    assert not other.cached and other.ir_sha256 != first.ir_sha256
