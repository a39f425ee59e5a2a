"""The ingress's plain parts, no Ray running: errors crossing a deployment handle, readiness, HTTP bodies.

A deployment handle here is a stand-in with the handle's calling convention (`handle.method.remote(...)`,
awaited); the errors are Ray's own exception classes, raised as Ray raises them. The same parts run behind the
real app in test_serve_http.py and test_serve_grpc.py.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from ray.exceptions import RayTaskError
from ray.serve.exceptions import BackPressureError
from starlette.exceptions import HTTPException

from optserve.deadline import Deadline
from optserve.engine.interface import Generation, PromptTooLongError, SamplingOptions
from optserve.serve import schemas
from optserve.serve.edges.http_app import kserve_model, named_model, readiness_response
from optserve.serve.errors import ErrorKind, ServiceError, unavailable
from optserve.serve.replicas.handles import EngineClient, as_service_error, call
from optserve.serve.replicas.readiness import READY, deployment_state, readiness

METADATA = schemas.ModelMetadata(
    name="passformer", version="abc", backend="torch", platform="cpu", ready=True, reason="",
    strategies=["greedy"], max_samples=10, max_feedback_rounds=2, max_ir_bytes=1 << 20,
)  # fmt: skip


class _Method:
    def __init__(self, answer):
        self.answer, self.calls, self.sent = answer, 0, []

    async def remote(self, *args):
        self.calls += 1
        self.sent.append(args)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def _handle(**methods) -> SimpleNamespace:
    return SimpleNamespace(**{name: _Method(answer) for name, answer in methods.items()})


def _from_replica(cause: BaseException) -> RayTaskError:
    """What awaiting a handle raises when the deployment raised `cause`."""
    return RayTaskError("generate", "Traceback ...", cause).as_instanceof_cause()


def test_a_deployment_s_own_error_arrives_as_itself():
    raised = ServiceError(ErrorKind.INVALID_ARGUMENT, "no size given for indices ['n']")
    with pytest.raises(ServiceError) as caught:
        asyncio.run(call(_handle(schedule=_from_replica(raised)), "schedule"))
    assert caught.value is raised and not isinstance(caught.value, RayTaskError)


def test_ray_s_own_failures_become_the_status_they_stand_for():
    overload = as_service_error(BackPressureError(num_queued_requests=9, max_queued_requests=8))
    assert overload.kind is ErrorKind.RESOURCE_EXHAUSTED
    assert as_service_error(RuntimeError("boom")).kind is ErrorKind.INTERNAL
    kept = unavailable("restarting")
    assert as_service_error(kept) is kept


def test_a_failed_engine_call_forgets_the_ready_metadata_but_a_too_long_prompt_does_not():
    handle = _handle(metadata=METADATA, generate=_from_replica(PromptTooLongError("9000 tokens")))
    engine = EngineClient(handle)
    asyncio.run(engine.metadata())
    with pytest.raises(PromptTooLongError):
        asyncio.run(engine.generate("ir", SamplingOptions()))
    asyncio.run(engine.metadata())
    assert handle.metadata.calls == 1  # still known
    handle.generate.answer = _from_replica(unavailable("the engine died"))
    with pytest.raises(ServiceError):
        asyncio.run(engine.generate("ir", SamplingOptions()))
    asyncio.run(engine.metadata())
    assert handle.metadata.calls == 2  # asked again


def test_a_busy_engine_stays_ready_its_known_metadata_answers_health_meanwhile():
    """One Optimize of a long unit fans out several generate calls and can fill the engine's router queue
    for a moment (CI: health asked then got NOT_SERVING); backpressure means busy, not gone."""
    busy = BackPressureError(num_queued_requests=4, max_queued_requests=4)
    handle = _handle(metadata=METADATA, generate=busy)
    engine = EngineClient(handle)
    deployments = {name: SimpleNamespace(status="HEALTHY", message="") for name in
                   ("PassOrderingEngine", "CompilerWorkers", "LoopTuneScheduler")}  # fmt: skip
    assert asyncio.run(readiness(deployments, engine))["model"] == READY
    with pytest.raises(BackPressureError):
        asyncio.run(engine.generate("ir", SamplingOptions()))
    handle.metadata.answer = busy
    assert asyncio.run(readiness(deployments, engine))["model"] == READY  # the kept metadata answered
    assert handle.metadata.calls == 2
    with pytest.raises(BackPressureError):  # nothing known yet: the refusal is the answer
        asyncio.run(EngineClient(handle).metadata(fresh=True))


def test_readiness_names_the_part_that_is_not_ready_and_why():
    broken = "2 of 2 compiler workers could not restart"
    deployments = {
        "PassOrderingEngine": SimpleNamespace(status="HEALTHY", message=""),
        "CompilerWorkers": SimpleNamespace(status="UNHEALTHY", message=broken),
    }
    not_loaded = METADATA.model_copy(update={"ready": False, "reason": "weights missing"})
    parts = asyncio.run(readiness(deployments, EngineClient(_handle(metadata=not_loaded))))
    assert parts == {
        "model": "weights missing",
        "compiler": f"deployment CompilerWorkers is UNHEALTHY: {broken}",
        "looptune": "deployment LoopTuneScheduler is missing",
    }
    assert deployment_state({"X": SimpleNamespace(status="UPSCALING", message="")}, "X") == READY
    assert readiness_response(parts).status_code == 503
    assert readiness_response(dict.fromkeys(parts, READY)).status_code == 200


def test_kserve_names_the_hosted_model_only():
    assert kserve_model(named_model(METADATA, "passformer")).versions == ["abc"]
    with pytest.raises(ServiceError) as caught:
        named_model(METADATA, "llama")
    assert caught.value.kind is ErrorKind.NOT_FOUND and "passformer" in caught.value.message


def test_ray_serve_does_not_hand_the_ingress_the_call_s_deadline():
    """Why serve/edges/grpc_edge.py adds the call's deadline to the metadata in Serve's proxy
    (serve/README.md): gRPC keeps `grpc-timeout` out of the invocation metadata, and the context Ray Serve's
    proxy passes the ingress (`RayServegRPCContext`, built from the proxy's own servicer context) has no
    `time_remaining`. If this fails, Ray now passes the deadline on, and the edge's metadata may go."""
    import grpc
    from ray.serve.grpc_util import RayServegRPCContext

    seen = {}

    async def handler(request, context):
        seen["proxy_remaining_s"] = context.time_remaining()
        seen["metadata"] = {key for key, _ in context.invocation_metadata()}
        seen["ingress_context"] = RayServegRPCContext(context)
        return b""

    async def call_with_deadline() -> None:
        server = grpc.aio.server()
        method = grpc.unary_unary_rpc_method_handler(handler)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("probe.P", {"M": method}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await channel.unary_unary("/probe.P/M")(b"", timeout=7.5)
        await server.stop(None)

    asyncio.run(call_with_deadline())
    assert 5 < seen["proxy_remaining_s"] <= 7.6  # the proxy knows the deadline (clocks differ by ms) ...
    assert not {"grpc-timeout", "grpc-deadline"} & seen["metadata"]  # ... the metadata does not carry it
    assert not hasattr(seen["ingress_context"], "time_remaining")  # ... nor what the ingress receives


def test_the_call_s_deadline_cuts_an_optimize_budget_to_what_the_call_leaves():
    from optserve.serve.edges.grpc_methods import fit_optimize, work_deadline
    from optserve.serve.schemas import OptimizeRequest

    def budget(remaining_s: float, deadline_s: float | None = None) -> float | None:
        request = OptimizeRequest(ir="", deadline_s=deadline_s)
        work = work_deadline(Deadline.after(remaining_s))
        return fit_optimize(request, work, default_s=30.0, max_s=300.0).deadline_s

    assert budget(10.0) == pytest.approx(9.0, abs=0.01)  # the default (30 s) cut, 1 s kept for the answer
    assert budget(10.0, deadline_s=5.0) == 5.0  # the request's own budget fits the call: kept
    assert budget(1.0, deadline_s=5.0) == pytest.approx(0.5, abs=0.01)  # a short call: half of what is left
    assert budget(100.0) is None  # the default fits: the request is left as it came
    assert budget(10.0, deadline_s=400.0) == 400.0  # over the limit: refused as asked, not hidden


def test_work_still_running_when_the_call_s_time_is_up_is_cancelled_as_deadline_exceeded():
    from optserve.serve.edges.grpc_methods import _within

    cancelled = []

    async def slow(call):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(call)
            raise

    async def own_timeout(call):
        raise TimeoutError("a backend's own timeout")

    started = time.monotonic()
    call = Deadline.after(0.2)
    with pytest.raises(ServiceError) as caught:
        asyncio.run(_within(call, slow))
    assert caught.value.kind is ErrorKind.DEADLINE_EXCEEDED and cancelled == [call]
    assert time.monotonic() - started < 5
    with pytest.raises(ServiceError) as caught:
        asyncio.run(_within(Deadline.after(-0.1), slow))  # nothing left: refused before any work
    assert caught.value.kind is ErrorKind.DEADLINE_EXCEEDED and cancelled == [call]
    with pytest.raises(TimeoutError, match="own timeout"):  # not mistaken for the call's deadline
        asyncio.run(_within(Deadline.after(5.0), own_timeout))


@pytest.mark.parametrize(
    ("kind", "pause_s"),
    [(ErrorKind.RESOURCE_EXHAUSTED, 1.0), (ErrorKind.UNAVAILABLE, 1.0), (ErrorKind.TOO_LARGE, None)],
)
def test_a_refusal_for_capacity_tells_the_client_when_to_retry(kind, pause_s):
    """Over real gRPC: the ingress's RESOURCE_EXHAUSTED (issue 21) and UNAVAILABLE (issue 38) carry
    `grpc-retry-pushback-ms`, which the client's retry policy follows; a body over the limit asks not to be
    retried."""
    import random

    import grpc

    from optserve.clients.python.retry import DEFAULT_RETRY
    from optserve.serve.edges.grpc_methods import _answer_error

    async def handler(request, context):
        return _answer_error(context, ServiceError(kind, "the service is at capacity"), b"")

    async def refused() -> grpc.aio.AioRpcError:
        server = grpc.aio.server()
        method = grpc.unary_unary_rpc_method_handler(handler)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("probe.P", {"M": method}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await channel.unary_unary("/probe.P/M")(b"", timeout=10)
        finally:
            await server.stop(None)
        return caught.value

    err = asyncio.run(refused())
    assert err.code() is kind.grpc_code
    assert DEFAULT_RETRY.pause_s(1, err, random.Random(0)) == pause_s


def test_an_http_refusal_for_capacity_has_retry_after():
    from optserve.serve.edges.http_app import _service_error_response

    busy = asyncio.run(_service_error_response(None, ServiceError(ErrorKind.RESOURCE_EXHAUSTED, "busy")))
    assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
    large = asyncio.run(_service_error_response(None, ServiceError(ErrorKind.TOO_LARGE, "large")))
    assert large.status_code == 413 and "retry-after" not in large.headers


def test_every_http_503_has_retry_after():
    """An unavailable part (UNAVAILABLE), readiness and a model's readiness that say "not yet": 503 with
    `Retry-After`, so a load balancer or client waits as the service asks (issue 38)."""
    from optserve.serve.edges.http_app import (
        _http_error_response,
        _service_error_response,
        kserve_model_readiness,
        readiness_response,
    )
    from optserve.serve.schemas import ModelMetadata

    restarting = ServiceError(ErrorKind.UNAVAILABLE, "the engine is being restarted")
    not_ready = ModelMetadata(
        name="m", version="v", backend="torch", platform="cpu", ready=False, reason="loading",
        strategies=[], max_samples=1, max_feedback_rounds=0, max_ir_bytes=1,
    )  # fmt: skip
    answers = [
        asyncio.run(_service_error_response(None, restarting)),
        asyncio.run(_http_error_response(None, HTTPException(503, "down"))),
        readiness_response({"model": "loading", "compiler": "ready"}),
        kserve_model_readiness(not_ready),
    ]
    assert [(a.status_code, a.headers.get("retry-after")) for a in answers] == [(503, "1")] * 4
    assert "retry-after" not in readiness_response({"model": "ready"}).headers


def test_the_compiler_client_sends_the_deadline_as_wall_clock_time_and_the_replica_reads_it_back():
    """A monotonic instant means nothing in another process on another host: the handle carries wall-clock
    time, which the CompilerWorkers replica turns back into its own monotonic clock (optserve/deadline.py)."""
    import time

    from optserve.serve.replicas.handles import CompilerClient

    handle = _handle(evaluate=[])
    deadline = Deadline.after(7.0)
    asyncio.run(CompilerClient(handle).evaluate_async("ir", [("-Oz",)], "text_size", deadline=deadline))
    asyncio.run(CompilerClient(handle).evaluate_async("ir", [("-Oz",)], "text_size"))
    (*_, wall_deadline, trace), (*_, no_deadline, _) = (
        handle.evaluate.sent
    )  # trace: serve/observability/tracing.py
    assert wall_deadline == pytest.approx(time.time() + 7.0, abs=0.5) and no_deadline is None
    assert trace is None  # traces off: no trace context is sent
    assert Deadline.from_wall(wall_deadline).at == pytest.approx(deadline.at, abs=0.01)


def test_the_engine_client_sends_the_deadline_as_wall_clock_time_and_the_replica_reads_it_back():
    """The engine's options carry the request's deadline as an instant of this process; the handle sends it
    as wall-clock time, so time queued at the engine replica counts against it."""
    from optserve.serve.replicas.deployments import PassOrderingEngine

    handle = _handle(generate=None)
    deadline = Deadline.after(7.0)
    asyncio.run(EngineClient(handle).generate("ir", SamplingOptions(deadline=deadline)))
    asyncio.run(EngineClient(handle).generate("ir", SamplingOptions()))
    (_, sent, _, wall_deadline, _), (*_, no_deadline, _) = handle.generate.sent  # then the trace context
    assert sent.deadline is None  # never a monotonic instant of another process
    assert wall_deadline == pytest.approx(time.time() + 7.0, abs=0.5) and no_deadline is None

    class _Engine:  # the replica's model, recording the options it is given
        async def generate(self, ir, options, feedback):
            self.options = options
            return Generation((), "m", tokens_computed=0)

    replica = object.__new__(PassOrderingEngine.func_or_class)  # no model loaded: its engine is set here
    replica.engine, replica.dead, replica.pending = _Engine(), False, 0
    asyncio.run(replica.generate("ir", sent, None, wall_deadline))
    assert replica.engine.options.deadline.at == pytest.approx(deadline.at, abs=0.01)


def test_the_call_s_deadline_cuts_a_schedule_search_to_what_the_call_leaves():
    from optserve.deadline import SEARCH_SHARE
    from optserve.serve.replicas.deployments import time_limit_within

    call = Deadline.after(4.0)
    assert time_limit_within(10.0, None, max_s=60.0) == 10.0  # no deadline (HTTP): as asked
    assert time_limit_within(10.0, call, max_s=60.0) == pytest.approx(SEARCH_SHARE * 4.0, abs=0.05)
    assert time_limit_within(1.0, call, max_s=60.0) == 1.0  # the asked limit fits: kept
    assert time_limit_within(100.0, call, max_s=60.0) == 100.0  # over the limit: refused as asked
    with pytest.raises(ServiceError) as caught:  # queued past the deadline: no search for a caller gone
        time_limit_within(1.0, Deadline.after(-0.1), max_s=60.0)
    assert caught.value.kind is ErrorKind.DEADLINE_EXCEEDED


def test_the_looptune_client_sends_the_deadline_as_wall_clock_time():
    """The LoopTune replica takes one request at a time: time queued there counts against the deadline."""
    from optserve.serve.replicas.handles import LoopTuneClient

    handle = _handle(schedule=None)
    request = schemas.ScheduleRequest(einsum="C[m,n] += A[m,k] * B[k,n]", sizes={"m": 8, "k": 8, "n": 8})
    asyncio.run(LoopTuneClient(handle).schedule(request, deadline=Deadline.after(7.0)))
    asyncio.run(LoopTuneClient(handle).schedule(request))
    (_, wall_deadline, _), (_, no_deadline, _) = handle.schedule.sent  # then the trace context
    assert wall_deadline == pytest.approx(time.time() + 7.0, abs=0.5) and no_deadline is None


def test_a_schedule_search_longer_than_the_deadline_answers_its_best_by_then():
    """A real search (random walks on a 128^3 matmul, JIT-compiled and timed, until its time limit) with
    the server's default limit (10 s) and a deadline 1.5 s away: the best schedule found, marked
    `timed_out`, before the deadline."""
    from optserve.config import Settings
    from optserve.kernels.measure import peak_gflops
    from optserve.serve.replicas.deployments import schedule

    peak_gflops()  # measured once per process (0.3 s): before the clock starts, as in a warm replica

    request = schemas.ScheduleRequest(
        einsum="C[m,n] += A[m,k] * B[k,n]", sizes={"m": 128, "k": 128, "n": 128}, method="random"
    )
    started = time.monotonic()
    response = schedule(request, Settings(), deadline=Deadline(started + 1.5))
    took_s = time.monotonic() - started
    print(f"answered in {took_s:.2f} s of 1.5 s; search {response.seconds:.2f} s")
    assert response.timed_out and response.measured and response.gflops > 0
    assert took_s < 1.5, took_s
