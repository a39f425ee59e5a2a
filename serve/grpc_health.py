"""The standard `grpc.health.v1.Health` service on Ray Serve's gRPC proxy, with `Check` only.

Ray Serve routes each registered RPC to the ingress method of the same name, so `Check` is answered by the
ingress (which knows whether the model, compiler workers and LoopTune can work). `Watch` is not registered:
a stream per watcher would hold an ingress slot for good, and gRPC answers it UNIMPLEMENTED by itself.
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2

SERVICE_NAME = "grpc.health.v1.Health"


def add_health_check_to_server(servicer, server) -> None:
    """Like grpc_health's `add_HealthServicer_to_server`, without `Watch`."""
    check = grpc.unary_unary_rpc_method_handler(
        servicer.Check,
        request_deserializer=health_pb2.HealthCheckRequest.FromString,
        response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, {"Check": check}),))
