"""optcc's call to the service: one Optimize over gRPC, importing only grpc, the generated messages and the
request helpers.

The Python client (clients/python/) is the general one (pydantic settings, retry policies, the asyncio
client, health checks); in a fresh process its imports cost more CPU than clang -Oz needs for most units of
a C project, and optcc is a fresh process per unit. This module's imports cost less than half as much
(docs/bench/clients.md has both). Same request (clients/python/requests.py: optimize_request), same call
deadline (the request's plus DEADLINE_MARGIN_S), same errors (CallError); the token and CA certificate come
from the same environment variables, and channel_policy.py decides whether and how they are used (no plaintext
beyond loopback unless OPTCC_INSECURE=1, and never a token over plaintext beyond loopback). UNAVAILABLE and
RESOURCE_EXHAUSTED (and the proxy's INTERNAL for a replica that died with the call: requests.py replica_died)
are tried again, as the Python client's default policy does, up to ATTEMPTS tries within the call's deadline.
"""

from __future__ import annotations

import os
import time

import grpc

from optserve.clients import channel_policy
from optserve.clients.python.requests import CallError, optimize_request, optimize_timeout_s, replica_died
from optserve.v1 import optserve_pb2 as pb

OPTIMIZE = "/optserve.v1.PassOrdering/Optimize"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # as the Python client's channel
ATTEMPTS = 3
RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})
FIRST_PAUSE_S = 0.2  # doubled before each further try


def optimize(server: str, bitcode: bytes, **options) -> pb.OptimizeResponse:
    """The service's answer for the unit's `bitcode` (options: requests.OptimizeOptions); CallError
    when it answers an error (after the retries); channel_policy.Refused, before any connection, when the
    server may not be called without TLS."""
    channel_plan = channel_policy.plan(server, os.environ)
    request = optimize_request(bitcode, **options)
    timeout_s = optimize_timeout_s(request)
    token, ca_cert = channel_plan.token, channel_plan.ca_cert
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    channel_options = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ]
    if ca_cert:
        with open(ca_cert, "rb") as pem:
            credentials = grpc.ssl_channel_credentials(root_certificates=pem.read())
        channel = grpc.secure_channel(server, credentials, options=channel_options)
    else:
        channel = grpc.insecure_channel(server, options=channel_options)
    ends = None if timeout_s is None else time.monotonic() + timeout_s
    with channel:
        call = channel.unary_unary(
            OPTIMIZE,
            request_serializer=pb.OptimizeRequest.SerializeToString,
            response_deserializer=pb.OptimizeResponse.FromString,
        )
        for attempt in range(ATTEMPTS):
            remaining_s = None if ends is None else max(ends - time.monotonic(), 0.001)
            try:
                return call(request, timeout=remaining_s, metadata=metadata)
            except grpc.RpcError as err:
                pause_s = FIRST_PAUSE_S * 2**attempt
                last = attempt + 1 == ATTEMPTS or not (err.code() in RETRIED or replica_died(err))
                if last or (ends is not None and time.monotonic() + pause_s >= ends):
                    failure = CallError.of(err)
                    if channel_plan.token_withheld and failure.code is grpc.StatusCode.UNAUTHENTICATED:
                        withheld = f"{failure.message} ({channel_policy.TOKEN_WITHHELD})"
                        failure = CallError(failure.code, withheld)
                    raise failure from None
            time.sleep(pause_s)
    raise AssertionError("unreachable")
