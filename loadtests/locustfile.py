"""Locust users of optserve: the same request mix over gRPC and over HTTP/JSON.

    locust -f loadtests/locustfile.py                          # web UI (http://localhost:8089), both users
    locust -f loadtests/locustfile.py HttpApiUser --headless -u 4 -t 60s --host http://127.0.0.1:8000
    locust -f loadtests/locustfile.py GrpcApiUser --headless -u 4 -t 60s --grpc-target 127.0.0.1:9000 \
        --strategy priority --samples 10 --tags optimize

Scenarios: one user class per protocol (GrpcApiUser, HttpApiUser; both run when none is named), each with
the tasks `optimize` (weight 4) and `schedule` (weight 1), tagged so that `--tags optimize` or
`--tags schedule` runs one alone. The options below pick the rest; the web UI shows them in its form, and
each also reads an environment variable (run_headless.py and older scripts set those).

Targets: HttpApiUser calls --host (default http://127.0.0.1:8000); GrpcApiUser calls --grpc-target
(default: --host's host name, port 9000).

The mix: --workload, JSON lines from workload.py (run_headless.py writes one from the corpus test split);
by default loadtests/default_workload.jsonl: the 28 functions of tests/data/c (clang-19 -O0, x86-64) and 16
matmuls, written by `python -m loadtests.workload loadtests/default_workload.jsonl --c-programs`.
"""

from grpc.experimental import gevent as grpc_gevent

grpc_gevent.init_gevent()  # before anything creates a gRPC channel (see REFERENCE.md)

import functools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Literal  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import grpc  # noqa: E402
from locust import HttpUser, User, between, events, tag, task  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from optserve.engine.interface import Strategy  # noqa: E402
from optserve.v1 import optserve_pb2 as pb  # noqa: E402

# The model's sampling strategies (the load is on the engine; the coreset strategies need none).
STRATEGIES = tuple(strategy.value for strategy in Strategy)
from optserve.v1 import optserve_pb2_grpc as pb_grpc  # noqa: E402

DEFAULT_WORKLOAD = Path(__file__).resolve().parent / "default_workload.jsonl"
DEFAULT_HTTP_HOST = "http://127.0.0.1:8000"
DEFAULT_GRPC_PORT = 9000


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    # On the parser itself: locust shows only those in the web UI's form (and only it takes is_secret).
    parser.add_argument(
        "--grpc-target",
        env_var="LOADTEST_GRPC_TARGET",
        default="",
        help=f"host:port of the gRPC API (default: --host's host name, port {DEFAULT_GRPC_PORT})",
    )
    parser.add_argument(
        "--workload",
        env_var="LOADTEST_WORKLOAD",
        default="",
        help=f"JSON lines of IR modules and loop nests (default: {DEFAULT_WORKLOAD.name})",
    )
    parser.add_argument(
        "--strategy",
        env_var="LOADTEST_STRATEGY",
        choices=STRATEGIES,
        default=Strategy.GREEDY.value,
        help="Optimize strategy",
    )
    parser.add_argument("--samples", env_var="LOADTEST_SAMPLES", type=int, default=1, help="candidates")
    parser.add_argument(
        "--deadline", env_var="LOADTEST_DEADLINE", type=float, default=30.0, help="Optimize deadline_s"
    )
    parser.add_argument(
        "--schedule-limit",
        env_var="LOADTEST_SCHEDULE_LIMIT",
        type=float,
        default=2.0,
        help="Schedule time_limit_s",
    )
    parser.add_argument(
        "--use-cache",
        env_var="LOADTEST_USE_CACHE",
        action="store_true",
        help="let the service answer repeats from its result cache (default: bypass it)",
    )
    parser.add_argument(
        "--token", env_var="OPTSERVE_TOKEN", default="", is_secret=True, help="the service's auth token"
    )


class LoadOptions(BaseModel):
    """The options above, checked once per user (the web UI may change them between runs)."""

    grpc_target: str = ""
    workload: str = ""
    strategy: Literal[STRATEGIES] = Strategy.GREEDY.value
    samples: int = Field(1, ge=1)
    deadline: float = Field(30.0, gt=0)
    schedule_limit: float = Field(2.0, gt=0)
    use_cache: bool = False
    token: str = ""

    @classmethod
    def of(cls, environment) -> "LoadOptions":
        parsed = vars(environment.parsed_options) if environment.parsed_options else {}
        return cls.model_validate({name: parsed[name] for name in cls.model_fields if name in parsed})

    @property
    def optimize_name(self) -> str:  # the stats row: one per scenario
        return f"Optimize {self.strategy}@{self.samples}"

    def grpc_address(self, host: str | None) -> str:
        return self.grpc_target or f"{urlsplit(host or DEFAULT_HTTP_HOST).hostname}:{DEFAULT_GRPC_PORT}"


class Workload(BaseModel):
    modules: list[str] = Field(min_length=1)
    nests: list[dict] = Field(min_length=1)


@functools.cache
def load_workload(path: str) -> Workload:
    with open(path or DEFAULT_WORKLOAD) as lines:
        mix = [json.loads(line) for line in lines if line.strip()]
    return Workload(
        modules=[item["ir"] for item in mix if "ir" in item],
        nests=[item for item in mix if "einsum" in item],
    )


class _OptserveUser(User):
    """What both protocols share: the options, the mix and the request bodies."""

    abstract = True
    wait_time = between(0.0, 0.5)

    def on_start(self):
        self.options = LoadOptions.of(self.environment)
        self.mix = load_workload(self.options.workload)

    def optimize_fields(self) -> dict:
        return {
            "strategy": self.options.strategy,
            "samples": self.options.samples,
            "deadline_s": self.options.deadline,
            "bypass_cache": not self.options.use_cache,
        }

    def schedule_fields(self) -> dict:
        nest = random.choice(self.mix.nests)
        return {"einsum": nest["einsum"], "sizes": nest["sizes"], "time_limit_s": self.options.schedule_limit}


class GrpcApiUser(_OptserveUser):
    def on_start(self):
        super().on_start()
        self.channel = grpc.insecure_channel(
            self.options.grpc_address(self.environment.host),
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
            ],
        )
        self.pass_ordering = pb_grpc.PassOrderingStub(self.channel)
        self.looptune = pb_grpc.LoopTuneStub(self.channel)
        token = self.options.token
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()

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

    @tag("optimize")
    @task(4)
    def optimize(self):
        fields = self.optimize_fields()
        fields["strategy"] = pb.Strategy.Value(fields["strategy"].upper())
        request = pb.OptimizeRequest(ir_text=random.choice(self.mix.modules), **fields)
        timeout = self.options.deadline + 5
        self._call(self.options.optimize_name, self.pass_ordering.Optimize, request, timeout)

    @tag("schedule")
    @task(1)
    def schedule(self):
        request = pb.ScheduleRequest(**self.schedule_fields())
        self._call("Schedule", self.looptune.Schedule, request, self.options.schedule_limit + 60)


class HttpApiUser(_OptserveUser, HttpUser):
    host = DEFAULT_HTTP_HOST  # --host or the web UI's host field replace it

    def on_start(self):
        super().on_start()
        if self.options.token:
            self.client.headers["authorization"] = f"Bearer {self.options.token}"

    @tag("optimize")
    @task(4)
    def optimize(self):
        body = {"ir": random.choice(self.mix.modules), **self.optimize_fields()}
        name, timeout = self.options.optimize_name, self.options.deadline + 5
        self.client.post("/v1/optimize", json=body, name=name, timeout=timeout)

    @tag("schedule")
    @task(1)
    def schedule(self):
        timeout = self.options.schedule_limit + 60
        self.client.post("/v1/schedule", json=self.schedule_fields(), name="Schedule", timeout=timeout)
