"""How the Python clients (sync and async) reach optserve: target, TLS, token and application metadata,
message limits.
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc
from pydantic import BaseModel, Field, SecretStr

TOKEN_ENV = "OPTSERVE_TOKEN"
CA_CERT_ENV = "OPTSERVE_CA_CERT"  # a PEM file: turns TLS on and trusts this CA


class ChannelSettings(BaseModel):
    """Everything about the channel of one client."""

    target: str
    token: SecretStr | None = None  # masked in repr and logs
    max_message_bytes: int = Field(64 * 1024 * 1024, gt=0)
    application: str | None = None  # the Ray Serve application, where a cluster runs several
    tls: bool = False
    ca_cert: Path | None = None

    @classmethod
    def of(cls, target: str, token=None, ca_cert=None, **fields) -> ChannelSettings:
        """Settings with the environment's defaults: the token from $OPTSERVE_TOKEN, the CA from
        $OPTSERVE_CA_CERT (which turns TLS on)."""
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        ca_cert = ca_cert if ca_cert is not None else os.environ.get(CA_CERT_ENV) or None
        return cls(target=target, token=token, ca_cert=ca_cert, **fields)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        token = self.token.get_secret_value() if self.token else ""
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return metadata + ((("application", self.application),) if self.application else ())

    @property
    def options(self) -> list[tuple[str, int]]:
        return [
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_receive_message_length", self.max_message_bytes),
        ]

    @property
    def credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials, or None for a plaintext channel."""
        if not (self.tls or self.ca_cert):
            return None
        root_certificates = self.ca_cert.read_bytes() if self.ca_cert else None
        return grpc.ssl_channel_credentials(root_certificates=root_certificates)
