"""Start and stop the whole service in this process's Ray: local by default, or a cluster's address.

`start` returns once every deployment is up and says where gRPC and HTTP listen. With a TLS certificate
configured, HTTP is HTTPS and a TLS front for gRPC (serve/edges/grpc_tls.py) listens on `serve.grpc_tls_port`.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from optserve.config import ServeSettings, Settings

# gRPC message limit of the proxy: room for the largest accepted module, its optimized form and object code.
_MESSAGE_BYTES_PER_IR_BYTE = 4
_MESSAGE_OVERHEAD_BYTES = 1 << 20
_GRPC_TLS_ACTOR = "optserve-grpc-tls"
# Read by Serve's controller: a proxy not ready within it is killed and started again (Ray's default: 5 s).
PROXY_READY_TIMEOUT_ENV = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
# Ray Serve's own background loops, slowed from ten times a second to what an idle service beside a build can
# afford: an idle service took 0.19 of a core with Ray's values, 0.14 with these (benchmarks/serve_idle_cpu.py
# measures it process by process; the controller 0.042 -> 0.018, the GCS it polls 0.018 -> 0.009).
SERVE_LOOP_ENV = {
    # the controller's reconcile loop (Ray's default: 0.1 s): deployments' states, replicas' health-check
    # results (every HEALTH_CHECK_PERIOD_S, serve/app.py) and autoscaling decisions are acted on within it
    "RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5",
    # replicas and handles hand their cached request metrics to Ray's metrics this often (Ray's default:
    # 0.1 s); Ray reports them every metrics_report_interval_ms
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
}
_LOST_POLL_S = 0.2  # how often `stop` looks for the local Ray instance's end while Serve shuts down
_grpc_tls_front = None  # the running front's actor handle, for `stop`


def grpc_message_limit(settings: Settings) -> int:
    """Bytes of one gRPC message Serve's proxy accepts (`RAY_SERVE_GRPC_MAX_MESSAGE_SIZE`)."""
    return settings.compiler.max_ir_bytes * _MESSAGE_BYTES_PER_IR_BYTE + _MESSAGE_OVERHEAD_BYTES


@dataclass(frozen=True)
class Endpoints:
    host: str
    http_port: int
    grpc_port: int
    tls: bool = False  # HTTP is HTTPS, gRPC with TLS on grpc_tls_port, plaintext gRPC for loopback only
    grpc_tls_port: int | None = None

    @property
    def http_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'localhost' if host in ('0.0.0.0', '[::]') else host}:{self.grpc_port}"

    @property
    def grpc_tls_target(self) -> str | None:
        if self.grpc_tls_port is None:
            return None
        return self.grpc_target.rsplit(":", 1)[0] + f":{self.grpc_tls_port}"

    def describe(self) -> str:
        line = f"optserve gRPC listening on {self.grpc_target}"
        if self.tls:
            line += " (plaintext: loopback callers only)"
        lines = [line]
        if self.grpc_tls_target:
            lines.append(f"optserve gRPC over TLS listening on {self.grpc_tls_target}")
        lines.append(f"optserve HTTP listening on {self.http_url} (OpenAPI docs at {self.http_url}/docs)")
        return "\n".join(lines)


def start(settings: Settings, proxy_location: str = "EveryNode") -> Endpoints:
    """Start (or join) Ray, start Serve's proxies on the configured ports, and deploy the application.

    `proxy_location="HeadOnly"` where several Ray nodes share one host (tests), as their proxies would
    otherwise compete for the same ports.
    """
    import ray
    from ray import serve
    from ray.serve.config import HTTPOptions, gRPCOptions

    from optserve.serve.app import APP_NAME, GRPC_SERVICER_FUNCTIONS, build_app
    from optserve.serve.edges.access import plaintext_grpc_host
    from optserve.serve.observability.logs import LOGGING_CONFIG
    from optserve.serve.replicas.loopback import local_ray_on_loopback

    serve_settings = settings.serve
    message_limit = grpc_message_limit(settings)
    # Read by Serve's proxy process, which inherits the environment of the Ray instance started here.
    os.environ["RAY_SERVE_GRPC_MAX_MESSAGE_SIZE"] = str(message_limit)
    os.environ.update(SERVE_LOOP_ENV)  # the same: the controller, the proxies and the replicas read them
    if not ray.is_initialized():
        local = serve_settings.ray_address is None
        # a local Ray is this machine alone: all of it on 127.0.0.1 (serve/replicas/loopback.py); the gRPC
        # proxy on serve.host, or on loopback behind the TLS front
        grpc_host = plaintext_grpc_host(serve_settings)
        runtime_env = local_ray_on_loopback(grpc_host) if local else {"env_vars": {}}
        runtime_env["env_vars"]["RAY_SERVE_GRPC_MAX_MESSAGE_SIZE"] = str(message_limit)
        runtime_env["env_vars"].update(SERVE_LOOP_ENV)  # a joined cluster's replicas do not inherit ours
        ray.init(
            # "local" starts a new instance: Ray would otherwise join whatever /tmp/ray/ray_current_cluster
            # names, even a cluster left behind by a killed service
            address="local" if local else serve_settings.ray_address,
            num_cpus=serve_settings.ray_num_cpus if local else None,
            include_dashboard=False,
            log_to_driver=True,  # the replicas' logs (serve/observability/logs.py) on this process's terminal
            # replicas report metrics this often (Ray's default: 10 s), see serve/observability/metrics.py
            _system_config={"metrics_report_interval_ms": 2000} if local else None,
            runtime_env=runtime_env,
        )
    tls = {}
    if serve_settings.tls_certfile or serve_settings.tls_keyfile:
        if not (serve_settings.tls_certfile and serve_settings.tls_keyfile):
            raise ValueError("serve.tls_certfile and serve.tls_keyfile must be given together")
        tls = {
            "ssl_certfile": str(serve_settings.tls_certfile),
            "ssl_keyfile": str(serve_settings.tls_keyfile),
        }
    serve.start(
        logging_config=LOGGING_CONFIG,
        controller_options=controller_options(serve_settings),
        proxy_location=proxy_location,
        http_options=HTTPOptions(host=serve_settings.host, port=serve_settings.http_port, **tls),
        grpc_options=gRPCOptions(
            port=serve_settings.grpc_port, grpc_servicer_functions=GRPC_SERVICER_FUNCTIONS
        ),
    )
    serve.run(build_app(settings), name=APP_NAME, route_prefix="/")
    if not tls:
        return Endpoints(serve_settings.host, serve_settings.http_port, serve_settings.grpc_port)
    tls_port = _start_grpc_tls_front(serve_settings, message_limit)
    return Endpoints(serve_settings.host, serve_settings.http_port, serve_settings.grpc_port, True, tls_port)


def controller_options(serve_settings: ServeSettings):
    """Environment of Serve's controller (applied when this start creates it, not to a running one).

    The controller kills a proxy that is not ready within RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S and starts
    another; with Ray's 5 s, a proxy starting on two saturated cores was killed and `make serve` failed.
    """
    from ray.serve.config import ControllerOptions

    env = {PROXY_READY_TIMEOUT_ENV: str(serve_settings.proxy_ready_timeout_s), **SERVE_LOOP_ENV}
    return ControllerOptions(runtime_env={"env_vars": env})


def _start_grpc_tls_front(serve_settings: ServeSettings, message_limit: int) -> int:
    """Start the gRPC TLS front as a Ray actor on this node, next to the Serve proxy it relays to.

    An actor rather than a Serve deployment: a second Serve application would make every plaintext client
    name its application in metadata. The actor is owned by this process like the app it fronts: Ray
    restarts it if its process dies, and `stop` (or this process ending) takes it down.
    """
    global _grpc_tls_front
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from optserve.serve.edges.grpc_tls import TlsFrontConfig, TlsFrontProcess

    host = f"[{serve_settings.host}]" if ":" in serve_settings.host else serve_settings.host
    config = TlsFrontConfig(
        listen=f"{host}:{serve_settings.grpc_tls_port}",
        upstream=f"127.0.0.1:{serve_settings.grpc_port}",
        certificate_chain=Path(serve_settings.tls_certfile).read_bytes(),
        private_key=Path(serve_settings.tls_keyfile).read_bytes(),
        max_message_bytes=message_limit,
    )
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    front = (
        ray.remote(TlsFrontProcess)
        .options(num_cpus=0, max_restarts=-1, scheduling_strategy=here, name=_GRPC_TLS_ACTOR)
        .remote(config)
    )
    port = ray.get(front.port.remote())  # raises here if the certificate or the port is unusable
    _grpc_tls_front = front
    return port


def stop() -> bool:
    """Take the application down, then Ray (the local instance `start` made, or this driver's connection);
    False when the local instance ended under this driver, and its process should end at once (`os._exit`).

    Serve's own shutdown asks its controller and waits up to 30 s for the answer. When the signal went to the
    whole process group (systemd's stop, a terminal's Ctrl-C, `kill -- -PGID`), Ray's own processes are
    ending beside this one and that answer never comes: as soon as a process of the local instance is gone,
    the wait ends and what is left of the instance is stopped here. `ray.shutdown` is then not called: the
    driver's side of it waits about 8 s for the gone raylet, and the interpreter's exit hooks would call it.
    """
    global _grpc_tls_front
    import threading

    import ray
    from ray import serve
    from ray._private import worker

    if _grpc_tls_front is not None and not _local_ray_lost():
        with contextlib.suppress(Exception):  # its node may be going: the node's end takes it too
            ray.kill(_grpc_tls_front, no_restart=True)
    _grpc_tls_front = None
    shut = threading.Thread(target=serve.shutdown, name="serve-shutdown", daemon=True)
    shut.start()
    while shut.is_alive() and not _local_ray_lost():
        shut.join(_LOST_POLL_S)
    if _local_ray_lost():
        worker._global_node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
        return False
    ray.shutdown()
    return True


def _local_ray_lost() -> bool:
    """Whether a process of the Ray instance this driver started (raylet, GCS, ...) has ended; False for a
    cluster this driver joined, whose processes are not its own."""
    from ray._private import worker

    node = worker._global_node
    return node is not None and bool(node.dead_processes())
