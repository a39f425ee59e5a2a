"""Who may call: an optional shared token, and loopback-only unless the service is told to listen wider.

HTTP: Ray Serve binds its HTTP proxy to `serve.host`, so a loopback host already keeps others out. gRPC: Ray
Serve 2.60's gRPC proxy listens on every interface unless serve/replicas/loopback.py rebinds it (a local Ray
started by `optserve serve`, or `serve run` with serve/loopback_env.yaml), so the ingress also enforces a
loopback host itself by checking the caller's address. With TLS configured, plaintext gRPC is for loopback
callers only (the TLS front of serve/edges/grpc_tls.py relays everyone else), whatever `serve.host` says.
Tokens travel as `authorization: Bearer <token>` (gRPC metadata or HTTP header); health checks need none, so
probes work without secrets.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import unquote

from pydantic import SecretStr

from optserve.serve.errors import ErrorKind, ServiceError

TOKEN_HEADER = "authorization"
_LOCAL_HOSTNAMES = {"localhost", "ip6-localhost"}


def is_loopback_host(host: str) -> bool:
    if host in _LOCAL_HOSTNAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def peer_host(peer: str) -> str | None:
    """The address in a gRPC peer string (`ipv4:127.0.0.1:5000`, `ipv6:%5B::1%5D:5000`, `unix:...`)."""
    kind, _, rest = unquote(peer).partition(":")
    if kind == "unix":
        return "localhost"
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return None


def check_peer(peer: str, listen_host: str) -> None:
    """PERMISSION_DENIED if the service is loopback-only and the caller is on another host."""
    if not is_loopback_host(listen_host):
        return
    host = peer_host(peer)
    if host is None or not is_loopback_host(host):
        raise ServiceError(
            ErrorKind.PERMISSION_DENIED,
            f"this service accepts calls from this host only (serve.host={listen_host}); caller {peer}",
        )


def plaintext_grpc_host(serve_settings) -> str:
    """The host plaintext gRPC callers must be on: loopback once gRPC has a TLS front, else `serve.host`."""
    tls = serve_settings.tls_certfile is not None and serve_settings.tls_keyfile is not None
    return "127.0.0.1" if tls else serve_settings.host


def check_token(presented: str | None, expected: SecretStr | str | None) -> None:
    """UNAUTHENTICATED unless `presented` is `Bearer <expected>` (no check when no token is configured).
    `expected` is `serve.auth_token` (a SecretStr) or its plain value; compared in constant time."""
    if expected is None:
        return
    if isinstance(expected, SecretStr):
        expected = expected.get_secret_value()
    scheme, _, token = (presented or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise ServiceError(
            ErrorKind.UNAUTHENTICATED,
            "missing or wrong token: send `authorization: Bearer <token>` (gRPC metadata or HTTP header)",
        )
