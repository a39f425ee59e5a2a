"""Locust users of optserve: the same request mix over gRPC and over HTTP/JSON.

Run by run_headless.py (which prepares the mix and sets these variables):
  LOADTEST_WORKLOAD     JSON lines from workload.py (IR functions and loop nests)
  LOADTEST_GRPC_TARGET  host:port of the gRPC API (GrpcApiUser)
  LOADTEST_STRATEGY     greedy | priority          LOADTEST_SAMPLES  candidates per request (priority)
  LOADTEST_DEADLINE     Optimize deadline_s        LOADTEST_SCHEDULE_LIMIT  Schedule time_limit_s
  LOADTEST_USE_CACHE    1: let the service answer repeats from its result cache (default: bypass it)
  OPTSERVE_TOKEN        the service's auth token, if any
HttpApiUser's host is locust's --host (the HTTP API's base URL).

Each user sends Optimize (weight 4) and Schedule (weight 1) with a random module or nest of the mix.
"""

from grpc.experimental import gevent as grpc_gevent

grpc_gevent.init_gevent()  # before anything creates a gRPC channel (see REFERENCE.md)

import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

import grpc  # noqa: E402
from locust import HttpUser, User, between, events, task  # noqa: E402

from optserve.v1 import optserve_pb2 as pb  # noqa: E402
from optserve.v1 import optserve_pb2_grpc as pb_grpc  # noqa: E402

with open(os.environ["LOADTEST_WORKLOAD"]) as _workload:
    _MIX = [json.loads(line) for line in _workload]
MODULES = [item["ir"] for item in _MIX if "ir" in item]
NESTS = [item for item in _MIX if "einsum" in item]
STRATEGY = os.environ.get("LOADTEST_STRATEGY", "greedy")
SAMPLES = int(os.environ.get("LOADTEST_SAMPLES", "1"))
DEADLINE_S = float(os.environ.get("LOADTEST_DEADLINE", "30"))
SCHEDULE_LIMIT_S = float(os.environ.get("LOADTEST_SCHEDULE_LIMIT", "2"))
BYPASS_CACHE = os.environ.get("LOADTEST_USE_CACHE", "") in ("", "0")
TOKEN = os.environ.get("OPTSERVE_TOKEN")
OPTIMIZE_NAME = f"Optimize {STRATEGY}@{SAMPLES}"


class GrpcApiUser(User):
    wait_time = between(0.0, 0.5)

    def on_start(self):
        self.channel = grpc.insecure_channel(
            os.environ.get("LOADTEST_GRPC_TARGET", "127.0.0.1:9000"),
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
            ],
        )
        self.pass_ordering = pb_grpc.PassOrderingStub(self.channel)
        self.looptune = pb_grpc.LoopTuneStub(self.channel)
        self.metadata = (("authorization", f"Bearer {TOKEN}"),) if TOKEN else ()

    def on_stop(self):
        self.channel.close()

    def _call(self, name: str, method, request, timeout_s: float) -> None:
        started = time.perf_counter()
        length, exception = 0, None
        try:
            length = method(request, timeout=timeout_s, metadata=self.metadata).ByteSize()
        except grpc.RpcError as err:
            exception = RuntimeError(f"{err.code().name}: {err.details()}")
        events.request.fire(
            request_type="grpc",
            name=name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=length,
            exception=exception,
            context={},
        )

    @task(4)
    def optimize(self):
        request = pb.OptimizeRequest(
            ir_text=random.choice(MODULES),
            strategy=pb.Strategy.Value(STRATEGY.upper()),
            samples=SAMPLES,
            deadline_s=DEADLINE_S,
            bypass_cache=BYPASS_CACHE,
        )
        self._call(OPTIMIZE_NAME, self.pass_ordering.Optimize, request, DEADLINE_S + 5)

    @task(1)
    def schedule(self):
        nest = random.choice(NESTS)
        request = pb.ScheduleRequest(
            einsum=nest["einsum"], sizes=nest["sizes"], time_limit_s=SCHEDULE_LIMIT_S
        )
        self._call("Schedule", self.looptune.Schedule, request, SCHEDULE_LIMIT_S + 60)


class HttpApiUser(HttpUser):
    wait_time = between(0.0, 0.5)

    def on_start(self):
        if TOKEN:
            self.client.headers["authorization"] = f"Bearer {TOKEN}"

    @task(4)
    def optimize(self):
        body = {
            "ir": random.choice(MODULES),
            "strategy": STRATEGY,
            "samples": SAMPLES,
            "deadline_s": DEADLINE_S,
            "bypass_cache": BYPASS_CACHE,
        }
        self.client.post("/v1/optimize", json=body, name=OPTIMIZE_NAME, timeout=DEADLINE_S + 5)

    @task(1)
    def schedule(self):
        nest = random.choice(NESTS)
        body = {"einsum": nest["einsum"], "sizes": nest["sizes"], "time_limit_s": SCHEDULE_LIMIT_S}
        self.client.post("/v1/schedule", json=body, name="Schedule", timeout=SCHEDULE_LIMIT_S + 60)
