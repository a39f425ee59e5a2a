"""How optcc may reach its service: TLS, or plaintext only where no one else is on the path.

Whoever can change the bytes between optcc and the service can put machine code into the build (the
answer's object) and read the bearer token. So, without a CA certificate (OPTSERVE_CA_CERT, TLS):
  - a loopback server (`localhost`, 127.0.0.0/8, ::1, a `unix:` socket) is called over plaintext, token
    and all: the path is this machine's;
  - any other server is refused (`Refused`: the unit keeps clang's object and the build goes on), unless
    the user opts in with OPTCC_INSECURE=1; even then the token is never sent over plaintext.
A host name other than `localhost` counts as remote even when it resolves to a loopback address: the
decision is made on the name optcc was given, not on what a resolver answers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

TOKEN_ENV, CA_CERT_ENV = "OPTSERVE_TOKEN", "OPTSERVE_CA_CERT"  # clients/python/channel.py's names
INSECURE_ENV = "OPTCC_INSECURE"
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
# Why a call failed with the token withheld: added to the service's UNAUTHENTICATED answer.
TOKEN_WITHHELD = "OPTSERVE_TOKEN is not sent over plaintext to a server beyond loopback: set OPTSERVE_CA_CERT"


class Refused(Exception):
    """optcc will not call this server over this channel; the message says why and what to set."""


@dataclass(frozen=True)
class ChannelPlan:
    """How to call the service: `ca_cert` (a PEM path: TLS) or None (plaintext), and the token to send (None:
    none); `token_withheld`: a token was set but is not sent (plaintext beyond loopback)."""

    ca_cert: str | None
    token: str | None
    token_withheld: bool = False


def is_loopback(server: str) -> bool:
    """Whether a gRPC target (`host:port`, `[v6]:port`, `dns:///host:port`, `ipv4:...`, `unix:path`) names
    this machine by a loopback address or the name `localhost`."""
    target = server.strip()
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme) :]
            break
    if not target or "," in target:  # a list of addresses: each would need to be loopback; keep it simple
        return False
    if target.startswith("["):  # [v6]:port
        host = target[1 : target.find("]")] if "]" in target else ""
    elif target.count(":") == 1:
        host = target.split(":", 1)[0]
    else:  # a bare host, or a bare IPv6 address without a port
        host = target
    host = host.rstrip(".").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def plan(server: str, env: Mapping[str, str]) -> ChannelPlan:
    """The channel optcc may open to `server` under `env`'s settings; Refused when it may open none."""
    ca_cert = env.get(CA_CERT_ENV) or None
    token = env.get(TOKEN_ENV) or None
    if ca_cert or is_loopback(server):
        return ChannelPlan(ca_cert, token)
    if env.get(INSECURE_ENV, "").strip().lower() not in ("1", "true", "yes", "on"):
        raise Refused(
            f"optserve at {server} is not on this machine and {CA_CERT_ENV} is not set: optcc does not "
            f"call it over plaintext, where anyone on the path could change the object code it links "
            f"(set {CA_CERT_ENV} to call it over TLS, or {INSECURE_ENV}=1 to accept plaintext)"
        )
    return ChannelPlan(None, None, token_withheld=token is not None)
