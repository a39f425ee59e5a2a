"""The optserve.v1 gRPC services as Ray Serve's proxy registers them: requests passed on as raw bytes.

grpcio decodes a request with its method's deserializer before any handler runs, and a decoder that fails
becomes status UNKNOWN, which optserve code cannot change. Ray Serve's proxy keeps whatever request
deserializer a servicer function registers (it replaces only the handler and the response serializer), so
these register none: the proxy forwards the bytes, and the ingress parses them with `parse_request`, answering
garbage INVALID_ARGUMENT with the message type it expected. Registering them also installs the proxy's edges:
the call's deadline and retry info, which the proxy leaves out (serve/edges/grpc_edge.py), and flow control of
HTTP request bodies (serve/edges/http_edge.py).
"""

from __future__ import annotations

from typing import TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from optserve.serve.edges import grpc_edge, http_edge
from optserve.serve.errors import ErrorKind, ServiceError
from optserve.v1 import optserve_pb2

M = TypeVar("M", bound=Message)


def _describe(request_type: type[Message], err: DecodeError) -> str:
    return f"the request is not a valid {request_type.DESCRIPTOR.full_name} message ({err})"


def decode_problem(request_type: type[Message], raw: bytes) -> str | None:
    """Why `raw` is not a serialized `request_type` message, or None if it is one."""
    try:
        request_type.FromString(raw)
    except DecodeError as err:
        return _describe(request_type, err)
    return None


def parse_request(request_type: type[M], raw: bytes) -> M:
    """The request message serialized in `raw`; INVALID_ARGUMENT if the bytes are not one."""
    try:
        return request_type.FromString(raw)
    except DecodeError as err:
        raise ServiceError(ErrorKind.INVALID_ARGUMENT, _describe(request_type, err)) from None


def add_raw_request_service(
    servicer, server, service: ServiceDescriptor, methods: set[str] | None = None
) -> None:
    """Register `service`'s unary methods (or only `methods`) on `server`, the requests left undecoded."""
    grpc_edge.install(server)
    http_edge.install()  # the same proxy process serves HTTP: its body reading is paced
    handlers = {
        method.name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=None,
            response_serializer=GetMessageClass(method.output_type).SerializeToString,
        )
        for method in service.methods
        if methods is None or method.name in methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))


def add_pass_ordering_to_server(servicer, server) -> None:
    add_raw_request_service(servicer, server, optserve_pb2.DESCRIPTOR.services_by_name["PassOrdering"])


def add_looptune_to_server(servicer, server) -> None:
    add_raw_request_service(servicer, server, optserve_pb2.DESCRIPTOR.services_by_name["LoopTune"])
