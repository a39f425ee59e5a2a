"""Start and stop the whole service in this process's Ray: local by default, or a cluster's address.

`start` returns once every deployment is up and says where gRPC and HTTP listen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from optserve.config import Settings

# gRPC message limit of the proxy: room for the largest accepted module, its optimized form and object code.
_MESSAGE_BYTES_PER_IR_BYTE = 4
_MESSAGE_OVERHEAD_BYTES = 1 << 20


@dataclass(frozen=True)
class Endpoints:
    host: str
    http_port: int
    grpc_port: int
    tls: bool = False  # HTTP is HTTPS (gRPC is always plaintext: Ray Serve's gRPC proxy has no TLS)

    @property
    def http_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'localhost' if host in ('0.0.0.0', '[::]') else host}:{self.grpc_port}"

    def describe(self) -> str:
        return (
            f"optserve gRPC listening on {self.grpc_target} (all interfaces at the socket; "
            f"callers outside loopback refused unless serve.host allows them)\n"
            f"optserve HTTP listening on {self.http_url} (OpenAPI docs at {self.http_url}/docs)"
        )


def start(settings: Settings, proxy_location: str = "EveryNode") -> Endpoints:
    """Start (or join) Ray, start Serve's proxies on the configured ports, and deploy the application.

    `proxy_location="HeadOnly"` where several Ray nodes share one host (tests), as their proxies would
    otherwise compete for the same ports.
    """
    import ray
    from ray import serve
    from ray.serve.config import HTTPOptions, gRPCOptions

    from optserve.serve.app import APP_NAME, GRPC_SERVICER_FUNCTIONS, build_app

    serve_settings = settings.serve
    message_limit = settings.compiler.max_ir_bytes * _MESSAGE_BYTES_PER_IR_BYTE + _MESSAGE_OVERHEAD_BYTES
    # Read by Serve's proxy process, which inherits the environment of the Ray instance started here.
    os.environ["RAY_SERVE_GRPC_MAX_MESSAGE_SIZE"] = str(message_limit)
    if not ray.is_initialized():
        ray.init(
            address=serve_settings.ray_address,
            num_cpus=None if serve_settings.ray_address else serve_settings.ray_num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"RAY_SERVE_GRPC_MAX_MESSAGE_SIZE": str(message_limit)}},
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
        proxy_location=proxy_location,
        http_options=HTTPOptions(host=serve_settings.host, port=serve_settings.http_port, **tls),
        grpc_options=gRPCOptions(
            port=serve_settings.grpc_port, grpc_servicer_functions=GRPC_SERVICER_FUNCTIONS
        ),
    )
    serve.run(build_app(settings), name=APP_NAME, route_prefix="/")
    return Endpoints(serve_settings.host, serve_settings.http_port, serve_settings.grpc_port, bool(tls))


def stop() -> None:
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()
