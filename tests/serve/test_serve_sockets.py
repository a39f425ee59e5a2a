"""Loopback means loopback: with the default config (vLLM backend, bundled model, serve.host 127.0.0.1) the
service listens on loopback only — its gRPC and HTTP ports and every server of its Ray (GCS, raylet, workers,
agents, dashboard, Serve's controller, proxy and replicas, the vLLM engine). Checked for both ways of starting
it on one machine, each in a process of its own, on ports of its own; the sockets are those of that process
and all its descendants:
- `optserve serve`, as `make serve` starts it;
- `serve run serve/config.yaml`, Ray Serve's own CLI on the Serve config file, as serve/README.md says to
  run it on one machine (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, `--runtime-env serve/loopback_env.yaml`);
  this also starts the config file's application and calls it.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from optserve.testing.service import DATA

REPO = Path(__file__).resolve().parents[2]
PORTS = {"optserve serve": (18731, 19731), "serve run": (18732, 19732)}
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


def _optserve_serve(tmp_path: Path, http_port: int, grpc_port: int) -> tuple[list[str], dict]:
    command = [sys.executable, "-m", "optserve.cli", "serve", "--http-port", str(http_port)]
    return [*command, "--grpc-port", str(grpc_port)], {}


def _serve_run(tmp_path: Path, http_port: int, grpc_port: int) -> tuple[list[str], dict]:
    """serve/config.yaml as shipped but the ports (there and in the optserve YAML its args name)."""
    settings = tmp_path / "optserve.yaml"
    settings.write_text(yaml.safe_dump({"serve": {"http_port": http_port, "grpc_port": grpc_port}}))
    config = yaml.safe_load((REPO / "serve" / "config.yaml").read_text())
    config["http_options"]["port"] = http_port
    config["grpc_options"]["port"] = grpc_port
    (application,) = config["applications"]
    application["args"]["config"] = str(settings)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    runtime_env = str(REPO / "serve" / "loopback_env.yaml")
    # = `serve run`: the console script Ray installs calls this module's cli()
    command = [sys.executable, "-m", "ray.serve.scripts", "run", "--runtime-env", runtime_env]
    return [*command, str(tmp_path / "config.yaml")], {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _stop(process: subprocess.Popen) -> None:
    # SIGINT: `serve run` shuts Serve down on KeyboardInterrupt; `optserve serve` stops Serve and Ray on it
    for sig, wait_s in ((signal.SIGINT, 90), (signal.SIGTERM, 30)):
        process.send_signal(sig)
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            pass
    process.kill()


@pytest.fixture(scope="module", params=["optserve serve", "serve run"])
def default_service(request, tmp_path_factory):
    from optserve.clients.python.client import CallError, OptserveClient

    http_port, grpc_port = PORTS[request.param]
    launcher = {"optserve serve": _optserve_serve, "serve run": _serve_run}[request.param]
    command, env = launcher(tmp_path_factory.mktemp("service"), http_port, grpc_port)
    process = subprocess.Popen(  # a process group of its own, as a service manager starts it
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        start_new_session=True,
    )
    client = OptserveClient(f"127.0.0.1:{grpc_port}", timeout_s=120)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"{request.param} exited"
            assert time.monotonic() < deadline, f"not ready after {START_TIMEOUT_S} s"
            try:
                if client.model_metadata().ready:
                    break
            except CallError:
                pass
            time.sleep(2)
        # one answer: every process of the request path (ingress, engine, compiler workers) is up
        client.optimize((DATA / "sum.ll").read_text(), bypass_cache=True)
        yield process, client, (http_port, grpc_port)
    finally:
        client.close()
        _stop(process)


@pytest.mark.slow
def test_the_default_service_listens_on_loopback_only(default_service):
    process, client, ports = default_service
    assert client.model_metadata().backend == "vllm"  # the default config's engine, with its processes
    sockets = _listening(psutil.Process(process.pid))
    assert set(ports) <= {port for _, port, _ in sockets}  # Serve's proxies are among the sockets seen
    beyond_loopback = [s for s in sockets if not _is_loopback(s[0])]
    assert not beyond_loopback, "\n".join(f"{a}:{p} {name}" for a, p, name in beyond_loopback)


GROUP_STOP_S = 25  # measured 4 s here; Serve's own shutdown would wait 30 s for a controller already gone


@pytest.mark.slow
def test_a_stop_signal_to_the_whole_process_group_ends_every_process_promptly(default_service, request):
    """systemd's stop (and `kill -- -PGID`) sends SIGTERM to every process of the group at once: Ray's own
    processes end beside the driver, which must not wait for answers that cannot come."""
    if request.node.callspec.params["default_service"] != "optserve serve":
        pytest.skip("`serve run` is Ray's own CLI")
    process = default_service[0]
    group = os.getpgid(process.pid)
    started = time.monotonic()
    os.killpg(group, signal.SIGTERM)
    process.wait(timeout=GROUP_STOP_S + 30)
    took = time.monotonic() - started
    assert took < GROUP_STOP_S, f"optserve serve took {took:.1f} s to end"
    while time.monotonic() - started < GROUP_STOP_S:
        left = [p for p in psutil.process_iter(["pid"]) if _group_of(p) == group]
        if not left:
            break
        time.sleep(0.5)
    assert not left, f"still running after {GROUP_STOP_S} s: {[p.pid for p in left]}"


def _group_of(process: psutil.Process) -> int | None:
    try:
        return None if process.status() == psutil.STATUS_ZOMBIE else os.getpgid(process.pid)
    except (psutil.Error, ProcessLookupError, PermissionError):
        return None
