"""Compose the optserve application from its deployments, with resources, scaling and queue limits.

`build_app(settings)` is what `optserve serve` runs; `app_builder` is the entry for a Ray Serve config file
(`serve run serve/config.yaml`), which names an optserve config file in its `args`.
"""

from __future__ import annotations

import os

from ray.serve import Application
from ray.serve.config import BackpressureConfig

from optserve.config import Settings, load_settings, replica_config
from optserve.serve.errors import RETRY_AFTER_S
from optserve.serve.ingress import Ingress
from optserve.serve.observability.logs import LOGGING_CONFIG
from optserve.serve.replicas.deployments import CompilerWorkers, LoopTuneScheduler, PassOrderingEngine

APP_NAME = "optserve"
# The gRPC services Ray Serve's proxy registers; each RPC is routed to the ingress method of the same name,
# which receives the request as bytes and parses it (serve/edges/grpc_services.py says why).
GRPC_SERVICER_FUNCTIONS = [
    "optserve.serve.edges.grpc_services.add_pass_ordering_to_server",
    "optserve.serve.edges.grpc_services.add_looptune_to_server",
    "optserve.serve.edges.grpc_health.add_health_check_to_server",
]
# Logical CPUs each replica reserves. A compiler replica reserves one per worker process of its pool
# (`compiler.workers`): that is where the compiling runs, so Ray never places more compile processes on a node
# than it has CPUs, and autoscaling adds compiler replicas only where CPUs are free. The other deployments
# mostly wait (ingress, LoopTune between kernel timings) or run the engine's threads: small fractions, one
# CPU together, so the default app (`compiler.workers` = CPUs - 1) fits a 2-core machine exactly. The ingress
# replicas share INGRESS_CPUS (two by default: a killed one is not an outage). A Serve config file can
# override any of these per deployment (ray_actor_options).
INGRESS_CPUS = 0.25
ENGINE_CPUS = 0.5
LOOPTUNE_CPUS = 0.25
# Ray Serve calls `check_health` of the engine, compiler and LoopTune replicas this often and replaces a
# replica after three failures in a row: a dead one is replaced within about three periods (default: 10 s).
HEALTH_CHECK_PERIOD_S = 2.0


def _engine_gpus(settings: Settings) -> float:
    if settings.serve.engine_num_gpus >= 0:
        return settings.serve.engine_num_gpus
    import ray

    return 1.0 if ray.is_initialized() and ray.cluster_resources().get("GPU", 0) >= 1 else 0.0


def build_app(settings: Settings) -> Application:
    serve_settings = settings.serve
    config = replica_config(settings)  # the token too, which a JSON dump masks
    queue_limit = serve_settings.max_queued_requests
    # Overload is answered at once: beyond the queue limit, gRPC gets RESOURCE_EXHAUSTED and HTTP 429.
    backpressure = BackpressureConfig(status_code=429, retry_after_s=RETRY_AFTER_S)
    spread = {"max_replicas_per_node": serve_settings.max_replicas_per_node}
    # One admitted Optimize of a long unit asks the engine for `unit_function_prompts` functions at once, and
    # health asks it for its metadata: its queue holds that fan-out of the ingress's queue, or a busy moment
    # would refuse work the ingress already accepted.
    engine_queue_limit = queue_limit * (settings.engine.unit_function_prompts + 1)
    engine = PassOrderingEngine.options(
        **spread,
        num_replicas=serve_settings.engine_replicas,
        ray_actor_options={"num_cpus": ENGINE_CPUS, "num_gpus": _engine_gpus(settings)},
        max_ongoing_requests=16,  # the engine batches concurrent requests itself
        max_queued_requests=engine_queue_limit,
        health_check_period_s=HEALTH_CHECK_PERIOD_S,
        logging_config=LOGGING_CONFIG,
    ).bind(config)
    compiler = CompilerWorkers.options(
        **spread,
        autoscaling_config={
            "min_replicas": serve_settings.compiler_replicas,
            "max_replicas": 4 * serve_settings.compiler_replicas,
            "target_ongoing_requests": 2,
        },
        ray_actor_options={"num_cpus": settings.compiler.workers},  # one per pool process
        max_ongoing_requests=4,
        max_queued_requests=queue_limit,
        health_check_period_s=HEALTH_CHECK_PERIOD_S,
        logging_config=LOGGING_CONFIG,
    ).bind(config)
    looptune = LoopTuneScheduler.options(
        autoscaling_config={
            "min_replicas": serve_settings.looptune_replicas,
            "max_replicas": 2 * serve_settings.looptune_replicas,
            "target_ongoing_requests": 1,
        },
        ray_actor_options={"num_cpus": LOOPTUNE_CPUS},
        max_ongoing_requests=1,  # kernel timings must not share the CPU with each other
        max_queued_requests=queue_limit,
        health_check_period_s=HEALTH_CHECK_PERIOD_S,  # a search runs in a thread: the check is answered
        logging_config=LOGGING_CONFIG,
    ).bind(config)
    return Ingress.options(
        num_replicas=serve_settings.ingress_replicas,
        ray_actor_options={"num_cpus": INGRESS_CPUS / serve_settings.ingress_replicas},
        max_ongoing_requests=serve_settings.max_ongoing_requests,
        max_queued_requests=queue_limit,
        backpressure_config=backpressure,
        logging_config=LOGGING_CONFIG,
    ).bind(config, engine, compiler, looptune)


def app_builder(args: dict) -> Application:
    """For `serve run`/`serve deploy`: `args: {config: path/to/optserve.yaml}` (optional); the token, as
    `optserve serve` reads it, from $OPTSERVE_TOKEN over the file's `serve.auth_token`."""
    return build_app(with_environment_token(load_settings(args.get("config"))))


def with_environment_token(settings: Settings) -> Settings:
    """`settings` with $OPTSERVE_TOKEN as `serve.auth_token` where the variable is set (and not empty)."""
    from optserve.clients.python.channel import TOKEN_ENV

    token = os.environ.get(TOKEN_ENV) or None
    if token is None:
        return settings
    serve_settings = settings.serve.model_validate(settings.serve.model_dump() | {"auth_token": token})
    return settings.model_copy(update={"serve": serve_settings})
