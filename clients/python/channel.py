"""How the Python clients (sync and async) reach optserve: target, TLS, token and application metadata,
message limits.

The token is a bearer secret: it is sent over TLS, or over plaintext to this machine only (a loopback
target, as optcc's rule in clients/channel_policy.py decides it). A client told to send it over plaintext
to another machine is refused when it is made, before a byte is sent, with a message naming both ways out.
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc
from pydantic import BaseModel, Field, SecretStr, model_validator

from optserve.clients.channel_policy import is_loopback

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

    @model_validator(mode="after")
    def _token_never_over_plaintext_beyond_loopback(self) -> ChannelSettings:
        plaintext = not (self.tls or self.ca_cert)
        if self.token and self.token.get_secret_value() and plaintext and not is_loopback(self.target):
            raise ValueError(
                f"the token is not sent over plaintext to {self.target}, which is not this machine: "
                f"anyone on the path could read it (set {CA_CERT_ENV} to call it over TLS, or call it "
                f"without a token)"
            )
        return self

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
