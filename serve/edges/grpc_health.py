"""The standard `grpc.health.v1.Health` service on Ray Serve's gRPC proxy, with `Check` only.

Ray Serve routes each registered RPC to the ingress method of the same name, so `Check` is answered by the
ingress (which knows whether the model, compiler workers and LoopTune can work). Like the optserve.v1 services
(serve/edges/grpc_services.py), the request reaches the ingress as raw bytes. `Watch` is not registered: a
stream per watcher would hold an ingress slot for good, and gRPC answers it UNIMPLEMENTED by itself.
"""

from __future__ import annotations

from grpc_health.v1 import health_pb2

from optserve.serve.edges.grpc_services import add_raw_request_service


def add_health_check_to_server(servicer, server) -> None:
    """Like grpc_health's `add_HealthServicer_to_server`, without `Watch`."""
    add_raw_request_service(servicer, server, health_pb2.DESCRIPTOR.services_by_name["Health"], {"Check"})
