"""Python client of a running optserve (gRPC): what `optserve optimize/schedule/health` and scripts use.

    with OptserveClient("localhost:9000") as client:
        answer = client.optimize(Path("f.ll").read_text(), strategy="priority", samples=10)
        print(answer.best.pipeline, answer.best.cost, answer.oz_cost)

Over TLS (the service's gRPC TLS port, serve.grpc_tls_port): `OptserveClient("host:9443", tls=True,
ca_cert="ca.pem")`; without `ca_cert` the system's root certificates are trusted.

Calls raise `CallError` (status code name + the server's message) when the service answers an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import grpc
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from optserve.v1 import optserve_pb2 as pb
from optserve.v1 import optserve_pb2_grpc as pb_grpc

DEFAULT_TARGET = "localhost:9000"
TOKEN_ENV = "OPTSERVE_TOKEN"
CA_CERT_ENV = "OPTSERVE_CA_CERT"  # a PEM file: turns TLS on and trusts this CA
# The server answers its own deadline (best so far, -Oz at worst); the call waits this much longer for it.
DEADLINE_MARGIN_S = 5.0
DEFAULT_TIMEOUT_S = 120.0


class CallError(Exception):
    """The service answered with an error status."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


def to_dict(message) -> dict:
    """A response as JSON-ready data, every field present, names as in the .proto file."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


class OptserveClient:
    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = 64 * 1024 * 1024,
        application: str | None = None,
        tls: bool = False,
        ca_cert: str | os.PathLike | None = None,
    ):
        """`application`: the Ray Serve application to call, needed only when a cluster runs several.
        `tls`: call over TLS; `ca_cert` (default $OPTSERVE_CA_CERT): PEM file of the CA to trust, and
        implies `tls`."""
        self.timeout_s = timeout_s
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._metadata += (("application", application),) if application else ()
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ]
        ca_cert = ca_cert if ca_cert is not None else os.environ.get(CA_CERT_ENV) or None
        if tls or ca_cert:
            root_certificates = Path(ca_cert).read_bytes() if ca_cert else None
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self.channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self.channel = grpc.insecure_channel(target, options=options)
        self._pass_ordering = pb_grpc.PassOrderingStub(self.channel)
        self._looptune = pb_grpc.LoopTuneStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    def _call(self, method, request, timeout_s: float | None = None):
        try:
            return method(request, timeout=timeout_s or self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as err:
            raise CallError(err.code(), err.details() or "") from None

    def optimize(
        self,
        ir: str | bytes,
        objective: str = "instruction_count",
        strategy: str = "greedy",
        samples: int = 1,
        feedback_rounds: int = 0,
        deadline_s: float = 0.0,
        return_ir: bool = False,
        return_object: bool = False,
        bypass_cache: bool = False,
    ) -> pb.OptimizeResponse:
        """The best pass list for `ir` (text, or bitcode as bytes) and every ranked candidate."""
        module = {"ir_bitcode": ir} if isinstance(ir, bytes) else {"ir_text": ir}
        request = pb.OptimizeRequest(
            objective=pb.Objective.Value(objective.upper()),
            strategy=pb.Strategy.Value(strategy.upper()),
            samples=samples,
            feedback_rounds=feedback_rounds,
            deadline_s=deadline_s,
            return_ir=return_ir,
            return_object=return_object,
            bypass_cache=bypass_cache,
            **module,
        )
        timeout_s = deadline_s + DEADLINE_MARGIN_S if deadline_s else None
        return self._call(self._pass_ordering.Optimize, request, timeout_s)

    def model_metadata(self) -> pb.ModelMetadata:
        return self._call(self._pass_ordering.GetModelMetadata, pb.ModelMetadataRequest())

    def schedule(
        self,
        einsum: str,
        sizes: Mapping[str, int],
        method: str = "",
        time_limit_s: float = 0.0,
        measure: bool = True,
        return_kernel: bool = False,
    ) -> pb.ScheduleResponse:
        """A loop schedule for the contraction `einsum` with index `sizes`."""
        request = pb.ScheduleRequest(
            einsum=einsum,
            sizes=dict(sizes),
            method=method,
            time_limit_s=time_limit_s,
            measure=measure,
            return_kernel=return_kernel,
        )
        timeout_s = time_limit_s + DEADLINE_MARGIN_S + 30.0 if time_limit_s else None
        return self._call(self._looptune.Schedule, request, timeout_s)

    def health(self, service: str = "") -> str:
        """`SERVING` / `NOT_SERVING` for the server ("") or one service (e.g. optserve.v1.PassOrdering)."""
        response = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> OptserveClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
