"""The Python client: the asyncio API next to the sync one and the sampling parameters, against the running
service; retries with backoff against a stand-in gRPC server that answers errors on purpose.
"""

from __future__ import annotations

import asyncio
import time
from concurrent import futures

import grpc
import pytest

from optserve.clients.python.client import AsyncOptserveClient, CallError, OptserveClient, RetryPolicy
from optserve.serve.app import APP_NAME
from optserve.testing.service import TOKEN
from optserve.v1 import optserve_pb2 as pb
from optserve.v1 import optserve_pb2_grpc as pb_grpc

MATMUL = "C[m,n] += A[m,k] * B[k,n]"
SIZES = {"m": 32, "k": 32, "n": 32}

# --- against the running service ---------------------------------------------------------------------------


def test_the_async_client_answers_as_the_sync_one(service, client, add_ir):
    endpoints, _ = service

    async def calls():
        async with AsyncOptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME) as aio:
            return await asyncio.gather(
                aio.optimize(add_ir, strategy="priority", samples=2),
                aio.optimize(add_ir, strategy="priority", samples=2, bypass_cache=True),
                aio.schedule(MATMUL, SIZES, method="base", measure=False),
                aio.model_metadata(),
                aio.health("optserve.v1.PassOrdering"),
            )

    optimized, recomputed, scheduled, metadata, health = asyncio.run(calls())
    expected = client.optimize(add_ir, strategy="priority", samples=2)
    pipelines = [c.pipeline for c in expected.candidates]
    assert [c.pipeline for c in optimized.candidates] == pipelines
    assert [c.pipeline for c in recomputed.candidates] == pipelines and not recomputed.cached
    assert [loop.index for loop in scheduled.loops] == ["m", "k", "n"]
    assert metadata == client.model_metadata()
    assert health == "SERVING"


def test_the_async_client_raises_call_errors(service):
    endpoints, _ = service

    async def bad_ir():
        async with AsyncOptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME) as aio:
            await aio.optimize("define i32 @f( {")

    with pytest.raises(CallError) as caught:
        asyncio.run(bad_ir())
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT and "does not parse" in caught.value.message


def _model_candidates(response: pb.OptimizeResponse) -> list[str]:
    return [c.pipeline for c in response.candidates if c.source == pb.CandidateSource.MODEL]


def test_sampling_parameters_reach_the_engine(client, sum_ir):
    def drawn(**options) -> list[str]:
        response = client.optimize(sum_ir, strategy="nucleus", samples=5, bypass_cache=True, **options)
        return _model_candidates(response)

    assert drawn(seed=1) == drawn(seed=1)  # seeded
    assert set(drawn(seed=1)) != set(drawn(seed=2))
    # A nucleus this narrow, or a temperature this low, concentrates the draws on the likeliest lists. (Not
    # "greedy's list alone": the stand-in model is random and near-uniform over long lists, so its near-ties
    # may break either way in a batch.)
    wide = len(drawn(seed=1))
    assert len(drawn(seed=1, top_p=0.01)) < wide and len(drawn(seed=3, temperature=0.01)) < wide


# --- retries, against a stand-in server ------------------------------------------------------------------


class FlakyPassOrdering(pb_grpc.PassOrderingServicer):
    """Answers the first `failures` calls with `code` (and optional retry pushback), then succeeds."""

    def __init__(self, failures: int, code=grpc.StatusCode.RESOURCE_EXHAUSTED, pushback_ms=None):
        self.failures, self.code, self.pushback_ms = failures, code, pushback_ms
        self.arrivals: list[float] = []

    def GetModelMetadata(self, request, context):
        self.arrivals.append(time.monotonic())
        if len(self.arrivals) <= self.failures:
            if self.pushback_ms is not None:
                context.set_trailing_metadata((("grpc-retry-pushback-ms", str(self.pushback_ms)),))
            context.abort(self.code, f"refusal {len(self.arrivals)}")
        return pb.ModelMetadata(name="stand-in", ready=True)

    def Optimize(self, request, context):
        metadata = self.GetModelMetadata(request, context)
        return pb.OptimizeResponse(model_id=metadata.name, warning=str(len(request.ir_text)))

    @property
    def pauses(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.arrivals, self.arrivals[1:], strict=False)]


@pytest.fixture
def flaky():
    """Start a stand-in server: flaky(servicer) -> its target."""
    servers = []

    def start(servicer: FlakyPassOrdering) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_PassOrderingServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED])
def test_refusals_are_retried_with_growing_pauses(flaky, code):
    servicer = FlakyPassOrdering(failures=2, code=code)
    policy = RetryPolicy(attempts=3, initial_backoff_s=0.2, multiplier=2.0)
    with OptserveClient(flaky(servicer), retry=policy, timeout_s=10) as client:
        assert client.model_metadata().name == "stand-in"
    assert len(servicer.arrivals) == 3
    first, second = servicer.pauses
    assert 0.1 < first < second < 1.0  # 0.2 s then 0.4 s, each with gRPC's +-20 % jitter


def test_retries_stop_after_the_attempts(flaky):
    servicer = FlakyPassOrdering(failures=10)
    with OptserveClient(flaky(servicer), timeout_s=10) as client, pytest.raises(CallError) as caught:
        client.model_metadata()
    assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED and len(servicer.arrivals) == 3


@pytest.mark.parametrize(
    ("code", "retry"),
    [(grpc.StatusCode.INVALID_ARGUMENT, RetryPolicy()), (grpc.StatusCode.RESOURCE_EXHAUSTED, None)],
)
def test_other_errors_and_a_client_without_retries_are_answered_at_once(flaky, code, retry):
    servicer = FlakyPassOrdering(failures=1, code=code)
    with OptserveClient(flaky(servicer), retry=retry) as client, pytest.raises(CallError) as caught:
        client.model_metadata()
    assert caught.value.code is code and len(servicer.arrivals) == 1


def test_the_server_pushback_sets_the_pause(flaky):
    servicer = FlakyPassOrdering(failures=1, pushback_ms=300)
    with OptserveClient(flaky(servicer), retry=RetryPolicy(initial_backoff_s=0.01), timeout_s=10) as client:
        assert client.model_metadata().name == "stand-in"
    (pause,) = servicer.pauses
    assert pause >= 0.3


def test_no_pause_outlives_the_call_deadline(flaky):
    """Tries and pauses share the call's 1 s: a pause that would not end before it ends the call at once
    with the last answer, whether the policy or the server (5 s pushback) asks for it."""
    for servicer in (FlakyPassOrdering(failures=100), FlakyPassOrdering(failures=100, pushback_ms=5000)):
        policy = RetryPolicy(attempts=100, initial_backoff_s=0.3, multiplier=1.0, jitter=0.0)
        started = time.monotonic()
        with (
            OptserveClient(flaky(servicer), retry=policy, timeout_s=1.0) as client,
            pytest.raises(CallError) as caught,
        ):
            client.model_metadata()
        assert time.monotonic() - started < 1.0
        assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        # tries at 0, .3, .6 and (if the tries themselves were quick) .9 s
        assert len(servicer.arrivals) in ((1,) if servicer.pushback_ms else (3, 4))


class SlowThenUnavailable(FlakyPassOrdering):
    """Answers the first Optimize UNAVAILABLE after `delay_s` (a try that used part of the call's time);
    records the budget (`deadline_s`) each Optimize asked for."""

    def __init__(self, delay_s: float):
        super().__init__(failures=1, code=grpc.StatusCode.UNAVAILABLE)
        self.delay_s = delay_s
        self.budgets: list[float] = []

    def Optimize(self, request, context):
        self.budgets.append(request.deadline_s)
        if len(self.budgets) == 1:
            time.sleep(self.delay_s)
        return super().Optimize(request, context)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_retry_asks_the_server_only_for_the_time_left_of_the_call(flaky, asynchronous):
    """deadline_s=10: the call waits 15 s (DEADLINE_MARGIN_S for the answer). The first try took 2 s, so the
    retry asks for 8 s, not 10 s, which would end the call with DEADLINE_EXCEEDED while the server works."""
    servicer = SlowThenUnavailable(delay_s=2.0)
    target = flaky(servicer)
    if asynchronous:

        async def call():
            async with AsyncOptserveClient(target) as client:
                return await client.optimize("ir", deadline_s=10)

        asyncio.run(call())
    else:
        with OptserveClient(target) as client:
            client.optimize("ir", deadline_s=10)
    first, retry = servicer.budgets
    assert first == 10 and 7.0 < retry < 8.0


def test_the_async_client_retries_too(flaky):
    servicer = FlakyPassOrdering(failures=2, code=grpc.StatusCode.UNAVAILABLE)
    target = flaky(servicer)

    async def metadata():
        async with AsyncOptserveClient(target, timeout_s=10) as client:
            return await client.model_metadata()

    assert asyncio.run(metadata()).name == "stand-in" and len(servicer.arrivals) == 3
