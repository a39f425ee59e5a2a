"""A local Ray that listens on loopback only, and Serve's gRPC servers bound where its HTTP proxy is.

A local Ray (no `serve.ray_address`) is this machine alone, so none of its servers need to be reachable from
elsewhere:
- Ray's own servers (GCS, raylet, workers, dashboard agent, runtime-env agent, metrics) bind the node's
  address. `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` is Ray's single-machine mode (its default on macOS and
  Windows), in which that address is 127.0.0.1.
- Ray Serve 2.60 binds its gRPC proxy and each replica's inter-deployment gRPC server to `[::]`, with no
  option to change it. `bind_serve_grpc` runs in every worker process of the job (Ray's
  `worker_process_setup_hook`) and makes replicas bind 127.0.0.1, and the proxy `serve.host` as Serve's HTTP
  proxy does (a wildcard `serve.host`, as in a container, keeps Serve's `[::]`).
tests/serve/test_serve_sockets.py lists the sockets of a running service, so a Ray that changes these
internals fails a test rather than listening beyond loopback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": the node's address is 127.0.0.1
PROXY_HOST_ENV = "OPTSERVE_GRPC_PROXY_HOST"
_SERVE_GRPC_WILDCARD = "[::]:"
_WILDCARD_HOSTS = {"0.0.0.0", "::", "[::]", ""}


def local_ray_on_loopback(serve_host: str) -> dict:
    """Make the local Ray this process starts next listen on 127.0.0.1; returns ray.init's runtime_env part.

    Call before `ray.init`: its processes read the setting from the environment they inherit.
    """
    import ray._private.ray_constants as ray_constants

    os.environ[SINGLE_MACHINE_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at import; this process may have imported Ray already
    proxy_host = "" if serve_host in _WILDCARD_HOSTS else serve_host
    return {
        "worker_process_setup_hook": f"{__name__}.bind_serve_grpc",
        "env_vars": {SINGLE_MACHINE_ENV: "0", PROXY_HOST_ENV: proxy_host},
    }


def bind_serve_grpc() -> None:
    """Ray worker setup hook: Serve's gRPC servers bind loopback (replicas) and serve.host (the proxy)."""
    try:
        from ray.serve._private import default_impl, replica
    except ImportError as err:
        log.warning("Serve's gRPC servers keep listening on all interfaces: %s", err)
        return
    replica.add_port_to_grpc_server = _on_host(replica.add_port_to_grpc_server, "127.0.0.1")
    if proxy_host := os.environ.get(PROXY_HOST_ENV):
        default_impl.add_grpc_address = _on_host(default_impl.add_grpc_address, proxy_host)


def _on_host(add_port: Callable, host: str) -> Callable:
    """`add_port(server, address)` with Serve's wildcard address replaced by `host` (same port)."""
    host = f"[{host.strip('[]')}]" if ":" in host else host

    def add_port_on_host(server, address: str):
        if address.startswith(_SERVE_GRPC_WILDCARD):
            address = host + ":" + address.removeprefix(_SERVE_GRPC_WILDCARD)
        return add_port(server, address)

    return add_port_on_host
