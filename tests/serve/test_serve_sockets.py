"""Loopback means loopback: `optserve serve` with the default config (vLLM backend, bundled model, serve.host
127.0.0.1) listens on loopback only — its gRPC and HTTP ports and every server of its Ray (GCS, raylet,
workers, agents, Serve's proxy and replicas, the vLLM engine). Started as `make serve` starts it, in a process
of its own, on ports of its own; the sockets are those of that process and all its descendants.
"""

from __future__ import annotations

import ipaddress
import signal
import subprocess
import sys
import time

import psutil
import pytest
from serve_helpers import DATA

HTTP_PORT, GRPC_PORT = 18731, 19731
START_TIMEOUT_S = 420


def _listening(root: psutil.Process) -> list[tuple[str, int, str]]:
    """(address, port, process) of every listening TCP socket of `root` and its descendants."""
    found = []
    for process in [root, *root.children(recursive=True)]:
        try:
            connections = process.net_connections(kind="inet")
            name = " ".join(process.cmdline())[:80]
        except psutil.Error:  # it ended meanwhile
            continue
        found += [(c.laddr.ip, c.laddr.port, name) for c in connections if c.status == psutil.CONN_LISTEN]
    return found


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is IPv4's loopback on a dual-stack socket
    return (mapped or ip).is_loopback


@pytest.fixture(scope="module")
def default_service():
    from optserve.serve.client import CallError, OptserveClient

    command = [sys.executable, "-m", "optserve.cli", "serve", "--http-port", str(HTTP_PORT)]
    command += ["--grpc-port", str(GRPC_PORT)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = OptserveClient(f"127.0.0.1:{GRPC_PORT}", timeout_s=120)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, "optserve serve exited"
            assert time.monotonic() < deadline, f"not ready after {START_TIMEOUT_S} s"
            try:
                if client.model_metadata().ready:
                    break
            except CallError:
                pass
            time.sleep(2)
        # one answer: every process of the request path (ingress, engine, compiler workers) is up
        client.optimize((DATA / "sum.ll").read_text(), bypass_cache=True)
        yield process, client
    finally:
        client.close()
        process.send_signal(signal.SIGTERM)  # optserve serve stops Serve and Ray
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.mark.slow
def test_the_default_service_listens_on_loopback_only(default_service):
    process, client = default_service
    assert client.model_metadata().backend == "vllm"  # the default config's engine, with its processes
    sockets = _listening(psutil.Process(process.pid))
    ports = {port for _, port, _ in sockets}
    assert {HTTP_PORT, GRPC_PORT} <= ports
    beyond_loopback = [s for s in sockets if not _is_loopback(s[0])]
    assert not beyond_loopback, "\n".join(f"{a}:{p} {name}" for a, p, name in beyond_loopback)
