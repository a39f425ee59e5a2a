"""Every RPC over real gRPC against the running service: happy paths, each status code, deadlines, health,
reflection. The model is the untrained tiny stand-in, so tests check the contract, not pass-list quality.
"""

from __future__ import annotations

import hashlib
import re
import socket
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import llvmlite.binding as llvm
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from optserve.clients.python.client import CallError, OptserveClient
from optserve.compiler.cost import text_size
from optserve.compiler.pipeline import evaluate
from optserve.testing.service import MAX_IR_BYTES, TOKEN, replica_pids, slow_candidates_module, slow_module
from optserve.v1 import optserve_pb2 as pb

MATMUL = "C[m,n] += A[m,k] * B[k,n]"


def codes(calls) -> list[str]:
    return [c.code.name if isinstance(c, CallError) else "OK" for c in calls]


def call(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except CallError as err:
        return err


def test_health_reports_the_server_and_each_service(client):
    assert client.health("") == "SERVING"
    assert client.health("optserve.v1.PassOrdering") == "SERVING"
    assert client.health("optserve.v1.LoopTune") == "SERVING"
    with pytest.raises(CallError) as caught:
        client.health("no.such.Service")
    assert caught.value.code is grpc.StatusCode.NOT_FOUND


def test_health_watch_is_not_served_and_says_so(client):
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    stream = health_pb2_grpc.HealthStub(client.channel).Watch(health_pb2.HealthCheckRequest(), timeout=10)
    with pytest.raises(grpc.RpcError) as caught:
        next(iter(stream))
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED


def test_health_needs_no_token(service):
    endpoints, _ = service
    with OptserveClient(endpoints.grpc_target, token="") as anonymous:
        assert anonymous.health() == "SERVING"


def test_health_answers_promptly_while_the_engine_prepares_a_long_module(client):
    """Health asks the engine replica for the model's metadata. Normalizing and tokenizing a 1.2 MB module
    took that replica ~2 s on its event loop, and health waited; now a module that cannot fit the context is
    refused by a token bound, and prompts are prepared in a thread (engine/engine.py `TokenBound`)."""
    with ThreadPoolExecutor(1) as pool:
        optimizing = pool.submit(call, client.optimize, slow_module(), deadline_s=10, bypass_cache=True)
        waits = []
        while not optimizing.done():
            started = time.monotonic()
            assert client.health("optserve.v1.PassOrdering") == "SERVING"
            waits.append(time.monotonic() - started)
        answer = optimizing.result()
    print(f"{len(waits)} health checks during the call, the slowest answered in {max(waits):.2f} s")
    assert not isinstance(answer, CallError) or answer.code is grpc.StatusCode.DEADLINE_EXCEEDED, answer
    assert len(waits) >= 5, waits  # the module's -Oz alone takes ~2 s: health was asked all along
    # Health waiting on the engine's preparation shows as a check of ~2 s. On 2 busy cores a check that does
    # not wait can still land near 1 s now and then: a bound on the median, a looser one on the worst.
    assert statistics.median(waits) < 0.5, f"health answered in {statistics.median(waits):.2f} s p50"
    assert max(waits) < 1.5, f"health answered in {max(waits):.2f} s at worst ({len(waits)} checks)"


def test_reflection_lists_and_describes_the_services(client):
    database = ProtoReflectionDescriptorDatabase(client.channel)
    services = set(database.get_services())
    assert {"optserve.v1.PassOrdering", "optserve.v1.LoopTune", "grpc.health.v1.Health"} <= services
    described = database.FindFileContainingSymbol("optserve.v1.PassOrdering")
    assert described.package == "optserve.v1"
    assert "OptimizeRequest" in [message.name for message in described.message_type]


def test_model_metadata_names_the_loaded_model(client):
    metadata = client.model_metadata()
    assert metadata.ready and metadata.reason == ""
    assert metadata.name == "passformer-tiny-random"
    assert re.fullmatch(r"[0-9a-f]{16}", metadata.version)
    assert (metadata.backend, metadata.platform) == ("torch", "cpu")
    assert metadata.max_ir_bytes == MAX_IR_BYTES and metadata.max_samples == 20


def test_greedy_optimize_is_never_worse_than_oz(client, sum_ir):
    response = client.optimize(sum_ir, bypass_cache=True)
    assert response.oz_cost == evaluate(sum_ir, ("-Oz",), "instruction_count").cost
    assert response.input_cost == 27
    assert response.best == response.candidates[0]
    assert response.best.cost <= response.oz_cost
    assert pb.OZ in [c.source for c in response.candidates]
    assert len(response.candidates) <= 2  # -Oz and at most one greedy candidate
    assert response.model_id == "passformer-tiny-random" and response.model_version
    assert re.fullmatch(r"[0-9a-f]{64}", response.ir_sha256)
    assert response.timings.total_s >= response.timings.sample_s > 0
    assert not response.deadline_hit and not response.cached


def test_priority_sampling_is_deterministic(client, add_ir):
    first = client.optimize(add_ir, strategy="priority", samples=3, bypass_cache=True)
    second = client.optimize(add_ir, strategy="priority", samples=3, bypass_cache=True)
    model = [c for c in first.candidates if c.source == pb.MODEL]
    assert 1 <= len(model) <= 3
    assert len({tuple(c.passes) for c in first.candidates}) == len(first.candidates)  # unique
    assert [(c.pipeline, c.cost) for c in first.candidates] == [
        (c.pipeline, c.cost) for c in second.candidates
    ]
    for candidate in model:
        assert candidate.logprob < 0 and candidate.pipeline
        assert candidate.cost == evaluate(add_ir, tuple(candidate.passes), "instruction_count").cost


def test_feedback_rounds_ask_the_model_again(client, sum_ir):
    response = client.optimize(sum_ir, strategy="priority", samples=2, feedback_rounds=1, bypass_cache=True)
    model = [c for c in response.candidates if c.source == pb.MODEL]
    assert 1 <= len(model) <= 4  # up to 2 per round, duplicates dropped
    assert response.best.cost <= response.oz_cost


def test_nucleus_sampling_answers(client, add_ir):
    response = client.optimize(add_ir, strategy="nucleus", samples=3)
    assert response.best.cost <= response.oz_cost


def test_bitcode_and_text_of_one_module_get_the_same_costs(client, sum_ir):
    bitcode = llvm.parse_assembly(sum_ir).as_bitcode()
    from_bitcode = client.optimize(bitcode, bypass_cache=True)
    from_text = client.optimize(sum_ir, bypass_cache=True)
    assert (from_bitcode.input_cost, from_bitcode.oz_cost) == (from_text.input_cost, from_text.oz_cost)


def test_text_size_objective_measures_the_object_file(client, sum_ir):
    response = client.optimize(sum_ir, objective="text_size", return_object=True, bypass_cache=True)
    assert response.objective == pb.TEXT_SIZE
    assert response.oz_cost == evaluate(sum_ir, ("-Oz",), "text_size").cost
    assert response.object_code.startswith(b"\x7fELF")


def test_the_optimized_module_is_returned_on_request(client, sum_ir):
    response = client.optimize(sum_ir, return_ir=True, bypass_cache=True)
    module = llvm.parse_assembly(response.optimized_ir)
    module.verify()
    instructions = sum(len(list(b.instructions)) for f in module.functions for b in f.blocks)
    assert instructions == response.best.cost


def test_a_repeated_request_is_answered_from_the_cache(client, add_ir):
    client.optimize(add_ir, strategy="priority", samples=2)
    again = client.optimize(add_ir, strategy="priority", samples=2)
    assert again.cached and {c.source for c in again.candidates} == {pb.CACHE}
    assert again.timings.total_s < 0.5


def test_a_deadline_returns_the_best_found_so_far(client, sum_ir):
    started = time.monotonic()
    # PS@20 on the stand-in takes ~0.4 s on a quiet machine; -Oz of this function takes milliseconds
    response = client.optimize(sum_ir, strategy="priority", samples=20, deadline_s=0.15, bypass_cache=True)
    assert time.monotonic() - started < 3.0
    assert response.deadline_hit
    assert response.best.cost <= response.oz_cost


def test_the_call_deadline_bounds_the_work_through_serves_proxy(service):
    """A call with a 4 s deadline and no `deadline_s`, for work of far longer (candidates of a one-function
    module whose -Oz alone takes ~15 s, little work in the ingress itself; the server's default budget is 60
    s): the ingress learns the call's deadline through Ray Serve's proxy (serve/edges/grpc_edge.py, issue 21)
    and answers within it with its best so far, the caller's baseline here, instead of working on while the
    caller gets DEADLINE_EXCEEDED."""
    from optserve.serve.app import APP_NAME

    endpoints, _ = service
    call_s = 4.0
    module = slow_candidates_module()  # built with clang before the clock starts
    with OptserveClient(
        endpoints.grpc_target, token=TOKEN, application=APP_NAME, timeout_s=call_s, retry=None
    ) as bounded:
        started = time.monotonic()
        response = bounded.optimize(
            module, strategy="priority", samples=20, baseline_cost=10**6, bypass_cache=True
        )
        took_s = time.monotonic() - started
    print(f"answered in {took_s:.2f} s of the call's {call_s} s; server: {response.timings.total_s:.2f} s")
    assert response.deadline_hit and took_s < call_s
    assert response.timings.total_s < call_s


def test_oz_not_finishing_before_the_deadline_is_deadline_exceeded(client):
    with pytest.raises(CallError) as caught:
        client.optimize(slow_module(), deadline_s=0.01, bypass_cache=True)
    assert caught.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert "-Oz" in caught.value.message


def test_a_client_baseline_is_beaten_or_kept_never_undercut(client, sum_ir):
    """The guarantee relative to the client's own cost: best never costs more than it, and a candidate is
    best (with its object) only when it costs less; -Oz is compiled as a candidate, the input is not."""
    oz = evaluate(sum_ir, ("-Oz",), "text_size").cost
    for baseline_cost in (1, oz, oz + 1, 10 * oz):
        answer = client.optimize(
            sum_ir, objective="text_size", baseline_cost=baseline_cost, return_object=True, bypass_cache=True
        )
        assert not answer.oz_skipped and (answer.oz_cost, answer.input_cost) == (oz, -1)
        assert answer.best == answer.candidates[0] and answer.best.cost <= baseline_cost
        assert [c.cost for c in answer.candidates if c.source == pb.OZ] == [oz]
        assert [c.cost for c in answer.candidates if c.source == pb.CLIENT_BASELINE] == [baseline_cost]
        if answer.best.source == pb.CLIENT_BASELINE:  # nothing cheaper: no object, the client keeps its own
            assert not answer.object_code and not answer.best.passes
            assert all(c.cost >= baseline_cost for c in answer.candidates if c.cost >= 0)
        else:
            assert answer.best.cost < baseline_cost and text_size(answer.object_code) == answer.best.cost
            assert answer.best.cost == min(c.cost for c in answer.candidates if c.cost >= 0)
    assert client.optimize(sum_ir, objective="text_size", baseline_cost=1).best.source == pb.CLIENT_BASELINE
    beaten = client.optimize(sum_ir, objective="text_size", baseline_cost=oz + 1, return_object=True)
    assert beaten.best.source != pb.CLIENT_BASELINE and beaten.best.cost <= oz  # -Oz at worst
    assert text_size(beaten.object_code) == beaten.best.cost


def test_a_client_baseline_answers_within_a_deadline_too_short_for_oz(client):
    answer = client.optimize(slow_module(), deadline_s=0.01, baseline_cost=1000, bypass_cache=True)
    assert answer.deadline_hit and answer.best.source == pb.CLIENT_BASELINE and answer.best.cost == 1000
    assert answer.oz_skipped and answer.oz_cost == -1  # -Oz did not finish: left out, not an error


CUT_DEADLINE_S = 2.0
CUT_BOUND_S = 1.5  # answer past the deadline: grace, the stop, the trip back, a loaded machine's slack


def test_the_deadline_stops_the_compiles_it_cuts(service, client, add_ir):
    """The call's deadline bounds the work, not only the wait: -Oz (~15 s) and the unit's lists (~5 s each)
    are still compiling at the deadline. The answer (the best found in time) comes at the deadline, a small
    request right after is answered at once (not queued behind abandoned compiles), and the compiler replica
    is left with all of its workers (and its standby one) alive and idle; -Oz is not left running ~13 s past
    the deadline."""
    _, settings = service
    module = slow_candidates_module()
    started = time.monotonic()
    answer = client.optimize(
        module,
        deadline_s=CUT_DEADLINE_S,
        baseline_cost=10**6,
        strategy="priority",
        samples=2,
        bypass_cache=True,
    )
    answered_s = time.monotonic() - started
    assert answer.deadline_hit and answer.oz_skipped and answer.best.cost <= 10**6  # the best found in time
    started = time.monotonic()
    small = client.optimize(add_ir, bypass_cache=True)
    small_s = time.monotonic() - started
    print(f"cut answered {answered_s:.2f} s (deadline {CUT_DEADLINE_S:g} s), small {small_s:.2f} s")
    assert answered_s < CUT_DEADLINE_S + CUT_BOUND_S, answered_s
    assert not small.deadline_hit and small_s < 6.0, (
        small_s
    )  # a stopped worker's restart, on a loaded machine
    workers = _compiler_workers_settled(timeout_s=10.0)
    compiler = settings.compiler  # 2 + 1 compiling, and the intake's 1
    processes = compiler.workers + compiler.standby_workers + compiler.intake_workers
    assert workers.keys() == set(replica_pids("CompilerWorkers")), workers
    # and a burst process (compiler.burst_workers) where a job found every worker busy
    assert all(processes <= n <= processes + compiler.burst_workers for n in workers.values()), workers


def _compiler_workers_settled(timeout_s: float) -> dict[int, int]:
    """Per compiler replica, its live worker processes, once none of them uses CPU for half a second."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while True:
        replicas = [psutil.Process(pid) for pid in replica_pids("CompilerWorkers")]
        workers = [child for replica in replicas for child in replica.children()]
        used = {child.pid: _cpu_s(child) for child in workers}
        time.sleep(0.5)  # a window in which an idle worker uses no CPU
        busy = [child.pid for child in workers if _cpu_s(child) - used[child.pid] > 0.05]
        if not busy:
            return {
                replica.pid: len([c for c in replica.children() if c.is_running()]) for replica in replicas
            }
        assert time.monotonic() < deadline, (
            f"compiler workers {busy} still busy {timeout_s:g} s after the answer"
        )


def _cpu_s(process) -> float:
    import psutil

    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


@pytest.mark.parametrize(
    ("ir", "options", "complaint"),
    [
        ("", {}, "empty IR"),
        ("define i32 @f() { ret i64 0 }", {}, "does not parse"),
        ("define void @f() {\nentry:\n  br label %nowhere\n}", {}, "IR"),
        (None, {"strategy": "priority", "samples": 21}, "more than the limit of 20"),
        (None, {"samples": 2}, "greedy decoding gives one candidate"),
        (None, {"feedback_rounds": 9}, "feedback_rounds"),
        (None, {"baseline_cost": 0}, "baseline_cost: Input should be greater than 0"),
        (None, {"baseline_cost": -5}, "baseline_cost: Input should be greater than 0"),
    ],
)
def test_bad_optimize_requests_are_invalid_argument(client, add_ir, ir, options, complaint):
    with pytest.raises(CallError) as caught:
        client.optimize(add_ir if ir is None else ir, **options)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert complaint in caught.value.message


def test_ir_over_the_size_limit_is_invalid_argument(client):
    with pytest.raises(CallError) as caught:
        client.optimize("; " + "x" * MAX_IR_BYTES)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "more than the limit" in caught.value.message


def test_a_message_over_the_grpc_limit_is_resource_exhausted(client):
    with pytest.raises(CallError) as caught:
        client.optimize("; " + "x" * (8 * MAX_IR_BYTES))
    assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_schedule_returns_a_measured_schedule_and_kernel(client):
    response = client.schedule(
        MATMUL, {"m": 32, "k": 32, "n": 32}, method="greedy1", time_limit_s=2.0, return_kernel=True
    )
    assert response.measured and response.gflops > 0 and response.base_gflops > 0
    assert response.method == "greedy1"
    covered = {}
    for loop in response.loops:  # the split loops of an index multiply back to its size
        covered.setdefault(loop.index, []).append(loop)
    assert set(covered) == {"m", "k", "n"}
    assert "define" in response.kernel_ir
    assert response.schedule.count("for ") >= 3


def test_schedule_by_default_decides_a_convolution_with_the_tile_cover(client):
    conv = "O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]"
    sizes = {"n": 1, "y": 6, "x": 10, "c": 8, "f": 24, "r": 3, "s": 3}
    response = client.schedule(conv, sizes, time_limit_s=5.0)
    assert response.method == "policy_tiles" and response.measured and response.gflops > 0
    assert {loop.index for loop in response.loops} == set(sizes)


def test_a_layer_sized_matmul_is_scheduled_on_the_threads_asked_for(client):
    """1536 x 256 x 1000 (786 MFLOP, more than 2 threads' share timed whole: 2 x 268 MFLOP) is decided on a
    sub-problem timed on the 2 threads, for a kernel of 2 threads (blocks of one output index)."""
    sizes = {"m": 1536, "k": 256, "n": 1000}
    response = client.schedule(MATMUL, sizes, threads=2)
    assert response.measured and response.gflops > 0 and response.threads == 2
    assert dict(response.timed_sizes) != sizes and set(response.timed_sizes) == set(sizes)
    one = client.schedule(MATMUL, {"m": 64, "k": 64, "n": 64}, threads=1)
    assert one.threads == 1 and dict(one.timed_sizes) == {"m": 64, "k": 64, "n": 64}


def test_a_repeated_schedule_request_is_answered_from_the_decision_cache(client):
    """The LoopTune replica keeps its decisions (policies/decision_cache.py): the same shape asked again is
    answered without search, with the schedule decided the first time."""
    sizes = {"m": 48, "k": 40, "n": 24}
    first = client.schedule(MATMUL, sizes, method="greedy1", time_limit_s=2.0, threads=2)
    again = client.schedule(MATMUL, sizes, method="greedy1", time_limit_s=2.0, threads=2)
    assert not first.cached and first.evaluations > 0
    assert again.cached and again.evaluations == 0 and again.schedule == first.schedule
    other = client.schedule(MATMUL, sizes, method="greedy1", time_limit_s=2.0, threads=1)
    assert not other.cached  # another thread count is another decision


def test_the_call_deadline_bounds_a_schedule_search(service):
    """A Schedule call with a 2 s deadline for a search that takes the server's default limit (10 s; random
    walks run until their limit): its time limit is cut to what the call leaves
    (serve/replicas/deployments.py `schedule`), so the call answers OK in time with the best schedule found
    (`timed_out`) instead of DEADLINE_EXCEEDED (issue 21)."""
    from optserve.serve.app import APP_NAME

    endpoints, _ = service
    call_s = 2.0
    with OptserveClient(
        endpoints.grpc_target, token=TOKEN, application=APP_NAME, timeout_s=call_s, retry=None
    ) as bounded:
        started = time.monotonic()
        response = bounded.schedule(MATMUL, {"m": 128, "k": 128, "n": 128}, method="random")
        took_s = time.monotonic() - started
    print(f"answered in {took_s:.2f} s of the call's {call_s} s; search {response.seconds:.2f} s")
    assert response.timed_out and response.measured and response.gflops > 0
    assert took_s < call_s


@pytest.mark.parametrize(
    ("einsum", "sizes", "method", "complaint"),
    [
        (MATMUL, {"m": 8, "k": 8}, "", "no size given"),
        (MATMUL, {"m": 8, "k": 8, "n": 8, "q": 8}, "", "unknown indices"),
        (MATMUL, {"m": 8, "k": 8, "n": 100000}, "", "allowed"),
        ("C[m,n] = A[m,k] + B[k,n]", {"m": 8, "k": 8, "n": 8}, "", "expected"),
        (MATMUL, {"m": 8, "k": 8, "n": 8}, "telepathy", "unknown method"),
        ("O[x+r] += I[x] * W[r]", {"x": 8, "r": 3}, "", "single indices"),
        ("C[m,n] += A[m,k] * B[k,n] * D[n]", {"m": 8, "k": 8, "n": 8}, "", "exactly two"),
    ],
)
def test_bad_loop_nests_are_invalid_argument(client, einsum, sizes, method, complaint):
    with pytest.raises(CallError) as caught:
        client.schedule(einsum, sizes, method=method, time_limit_s=1.0)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert complaint in caught.value.message


@pytest.mark.parametrize("token", ["", "wrong-token"])
def test_calls_without_the_token_are_unauthenticated(service, add_ir, token):
    endpoints, _ = service
    with OptserveClient(endpoints.grpc_target, token=token) as stranger:
        results = [
            call(stranger.optimize, add_ir),
            call(stranger.model_metadata),
            call(stranger.schedule, MATMUL, {"m": 8, "k": 8, "n": 8}),
        ]
    assert codes(results) == ["UNAUTHENTICATED"] * 3


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_a_loopback_service_cannot_be_reached_at_the_hosts_other_addresses(service):
    """Its gRPC port listens on 127.0.0.1 only (serve/replicas/loopback.py). The ingress refusing callers from
    other addresses (check_peer, test_serve_access.py) is the second line, for a proxy on all interfaces
    (cluster)."""
    endpoints, _ = service
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address, endpoints.grpc_port), timeout=5).close()


def test_overload_is_resource_exhausted_at_once(service):
    endpoints, _ = service
    started = time.monotonic()

    def timed_schedule():
        outcome = call(busy.schedule, MATMUL, {"m": 64, "k": 64, "n": 64}, "greedy2", 1.0)
        return outcome, time.monotonic() - started

    # No client retries: this is about the server's answer to a burst.
    with (
        OptserveClient(endpoints.grpc_target, token=TOKEN, retry=None) as busy,
        ThreadPoolExecutor(16) as pool,
    ):
        results = list(pool.map(lambda _: timed_schedule(), range(16)))
    outcomes = codes([r for r, _ in results])
    assert "OK" in outcomes and "RESOURCE_EXHAUSTED" in outcomes, outcomes
    assert set(outcomes) <= {"OK", "RESOURCE_EXHAUSTED"}
    rejected_after = [t for r, t in results if isinstance(r, CallError)]
    assert min(rejected_after) < 1.0  # refused at once, not after waiting in a queue


def test_a_backend_s_full_queue_is_resource_exhausted_with_retry_info(service):
    """A burst of 16 Schedules: the ingress admits more than LoopTune's one slot and queue, so LoopTune's
    refusals come back through the ingress and Ray Serve's proxy as RESOURCE_EXHAUSTED; the proxy refuses
    what the ingress's slots and queue cannot take (MAX_ONGOING + MAX_QUEUED = 10) itself. Both carry
    `grpc-retry-pushback-ms` (issue 21; the proxy's own refusals through serve/edges/grpc_edge.py)."""
    from optserve.clients.python.requests import schedule_request
    from optserve.serve.app import APP_NAME
    from optserve.v1 import optserve_pb2_grpc as pb_grpc

    endpoints, _ = service
    metadata = (("authorization", f"Bearer {TOKEN}"), ("application", APP_NAME))
    # each of another shape: a shape decided before is answered from the decision cache at once
    requests = [schedule_request(MATMUL, {"m": 64 + i, "k": 64, "n": 64}, "greedy2", 1.0) for i in range(16)]

    def schedule(stub, request):
        try:
            stub.Schedule(request, metadata=metadata, timeout=120)
            return None
        except grpc.RpcError as err:
            return err

    with grpc.insecure_channel(endpoints.grpc_target) as channel, ThreadPoolExecutor(16) as pool:
        stub = pb_grpc.LoopTuneStub(channel)
        errors = [e for e in pool.map(lambda r: schedule(stub, r), requests) if e is not None]
    assert {e.code() for e in errors} <= {grpc.StatusCode.RESOURCE_EXHAUSTED}, errors
    from_the_ingress = [e for e in errors if "the service is at capacity" in e.details()]
    from_the_proxy = [e for e in errors if "backpressure" in e.details()]
    assert from_the_ingress and from_the_proxy, [e.details() for e in errors]
    for err in errors:
        assert dict(err.trailing_metadata()).get("grpc-retry-pushback-ms") == "1000", err.details()


def test_the_reported_ir_hash_is_of_the_parsed_module(client, add_ir):
    response = client.optimize(add_ir)
    parsed = str(llvm.parse_assembly(add_ir))
    assert response.ir_sha256 == hashlib.sha256(parsed.encode()).hexdigest()


def test_a_whole_unit_gets_a_list_per_function_and_its_object_runs(client, tmp_path):
    program = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"
    as_optcc = ["clang-19", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-w", "-o", "-"]
    ir = subprocess.run([*as_optcc, str(program)], check=True, capture_output=True, text=True).stdout
    response = client.optimize(ir, objective="text_size", return_object=True, bypass_cache=True)
    (per_function,) = [c for c in response.candidates if c.source == pb.PER_FUNCTION]
    assert {"eval", "main", "mix"} <= set(per_function.function_passes) and per_function.cost > 0
    assert response.best.cost <= min(per_function.cost, response.oz_cost)
    assert text_size(response.object_code) == response.best.cost
    (tmp_path / "unit.o").write_bytes(response.object_code)
    subprocess.run(["clang-19", str(tmp_path / "unit.o"), "-o", str(tmp_path / "unit")], check=True)
    subprocess.run(["clang-19", "-O0", "-w", str(program), "-o", str(tmp_path / "reference")], check=True)
    outputs = [
        subprocess.run([str(tmp_path / n)], check=True, capture_output=True).stdout
        for n in ("unit", "reference")
    ]
    assert outputs[0] == outputs[1]
