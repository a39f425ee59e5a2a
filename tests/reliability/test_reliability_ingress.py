"""Two ingress replicas (serve.ingress_replicas, 2 by default): one SIGKILLed under load costs a retrying
client no call, and Serve brings the deployment back to two.

Ray Serve's proxies route each call to a live replica: a replica found dead when a call is routed (its
actor gone before it took the call) is dropped and the call routed again; a call the dead replica had
taken fails with the actor's death, which the proxy answers INTERNAL (gRPC) or 500 (HTTP); the Python
client tries such an answer again (clients/python/retry.py).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter

import grpc
import pytest

from optserve.clients.python.client import CallError, OptserveClient, RetryPolicy
from optserve.clients.python.retry import REPLICA_DIED
from optserve.serve.app import APP_NAME
from optserve.testing.polling import poll
from optserve.testing.service import TOKEN, replica_pids

RECOVERY_S = 180.0
CALL_DEADLINE_S = 20.0


class _Answer(grpc.RpcError):
    """An error status as the client receives it."""

    def __init__(self, code: grpc.StatusCode, details: str):
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return ()


def test_a_call_whose_replica_died_is_tried_again_and_no_other_internal_error():
    """The proxy's answer for a call its replica died with (message as Ray Serve 2.60 words it) is retried
    where UNAVAILABLE is; an INTERNAL answer of the service itself is not."""
    died = _Answer(grpc.StatusCode.INTERNAL, f"{REPLICA_DIED}\n\tclass_name: ServeReplica:optserve:Ingress")
    assert RetryPolicy().pause_s(1, died, random.Random(0)) is not None
    assert RetryPolicy(codes=frozenset({"RESOURCE_EXHAUSTED"})).pause_s(1, died, random.Random(0)) is None
    compile_failed = _Answer(
        grpc.StatusCode.INTERNAL, "-Oz failed to compile this module: compiler worker crashed"
    )
    assert RetryPolicy().pause_s(1, compile_failed, random.Random(0)) is None


def _two_running_again(before: list[int]) -> bool:
    """Serve runs two Ingress replicas again, one of them new (a process not in `before`)."""
    from ray import serve

    if not set(replica_pids("Ingress")) - set(before):
        return False
    states = serve.status().applications[APP_NAME].deployments["Ingress"].replica_states
    return states.get("RUNNING", 0) == 2


@pytest.mark.slow
def test_a_killed_ingress_replica_loses_no_call_of_a_retrying_client(rel_service, add_ir):
    """3 callers send Optimize one after another (cache bypassed, so each call spends time in an ingress)
    through clients that retry (6 tries); one of the two Ingress replicas is SIGKILLed while they do. Every
    call is answered OK, those the dead replica had taken included, and calls sent after the kill are
    answered by the other replica before Serve runs two again (one replica: nothing is answered until then,
    docs/bench/reliability.md)."""
    endpoints, settings = rel_service
    assert settings.serve.ingress_replicas == 2
    replicas = poll(lambda: len(replica_pids("Ingress")) == 2 and replica_pids("Ingress"), 120, "2 ingresses")
    calls: list[tuple[float, float, str]] = []  # (sent, ended, "OK" or the error)
    stop = threading.Event()

    def caller() -> None:
        retry = RetryPolicy(attempts=6)
        with OptserveClient(endpoints.grpc_target, token=TOKEN, application=APP_NAME, retry=retry) as client:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    client.optimize(add_ir, bypass_cache=True, deadline_s=CALL_DEADLINE_S)
                    code = "OK"
                except CallError as err:
                    code = f"{err.code.name}: {err.message[:200]}"
                calls.append((sent, time.monotonic(), code))

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    poll(lambda: sum(1 for *_, code in calls if code == "OK") >= 6, 120, "the calls to be answered")
    os.kill(replicas[0], signal.SIGKILL)
    killed = time.monotonic()
    poll(lambda: _two_running_again(replicas), RECOVERY_S, "two Ingress replicas again")
    back = time.monotonic()
    time.sleep(2.0)  # and calls after that
    stop.set()
    for thread in threads:
        thread.join(timeout=CALL_DEADLINE_S + 30)
    codes = Counter(code for *_, code in calls)
    in_flight = sum(1 for sent, ended, _ in calls if sent <= killed < ended)
    answered = sorted(ended - killed for sent, ended, code in calls if sent > killed and code == "OK")
    print(
        f"{len(calls)} calls, {in_flight} in flight at the kill: {dict(codes)}; calls sent after the kill "
        f"answered from {answered[0]:.1f} s after it; two replicas again {back - killed:.1f} s after it"
    )
    assert set(codes) == {"OK"}, codes
    assert answered[0] < back - killed
