"""Who may call: peer addresses read from gRPC peer strings, the loopback-only default and the bearer token
(serve/edges/access.py)."""

from __future__ import annotations

import pytest

from optserve.serve.edges.access import check_peer, check_token, is_loopback_host, peer_host
from optserve.serve.errors import ErrorKind, ServiceError


@pytest.mark.parametrize(
    ("peer", "host"),
    [("ipv4:127.0.0.1:5000", "127.0.0.1"), ("ipv6:%5B::1%5D:5000", "::1"), ("ipv4:10.1.2.3:80", "10.1.2.3")],
)
def test_peer_addresses_are_read_from_grpc_peer_strings(peer, host):
    assert peer_host(peer) == host


def test_a_loopback_service_refuses_other_hosts_only():
    check_peer("ipv4:127.0.0.1:5000", "127.0.0.1")
    check_peer("ipv6:%5B::1%5D:5000", "localhost")
    check_peer("ipv4:10.1.2.3:5000", "0.0.0.0")
    with pytest.raises(ServiceError) as caught:
        check_peer("ipv4:10.1.2.3:5000", "127.0.0.1")
    assert caught.value.kind is ErrorKind.PERMISSION_DENIED
    assert is_loopback_host("::1") and not is_loopback_host("0.0.0.0")


def test_a_token_is_required_only_when_configured():
    check_token(None, None)
    check_token("Bearer s3cret", "s3cret")
    for presented in (None, "", "Bearer wrong", "s3cret", "Basic s3cret"):
        with pytest.raises(ServiceError) as caught:
            check_token(presented, "s3cret")
        assert caught.value.kind is ErrorKind.UNAUTHENTICATED
