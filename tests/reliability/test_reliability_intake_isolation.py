"""The service's IR intake runs in its compiler workers: an input that crashes LLVM's reader ends one worker,
never the ingress or the calls in flight on it (issue 38). The inputs are kept crashers of the bitcode
fuzzing campaign (tests/data/reliability/bitcode_crashers), on which LLVM's reader aborts."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from optserve.clients.python.client import CallError
from optserve.testing.service import replica_pids, slow_module

CRASHERS = Path(__file__).resolve().parent.parent / "data" / "reliability" / "bitcode_crashers"


def aborting_crashers(count: int) -> list[bytes]:
    """`count` kept inputs whose recorded outcome is a failed assertion in LLVM's reader (SIGABRT)."""
    index = json.loads((CRASHERS / "index.json").read_text())
    names = sorted(name for name, outcome in index.items() if outcome.startswith("SIGABRT: Assertion"))
    return [(CRASHERS / name).read_bytes() for name in names[:count]]


def test_an_input_that_crashes_llvms_reader_ends_a_worker_not_the_ingress(rel_service, grpc_client, add_ir):
    ingress = replica_pids("Ingress")
    workers_before = {p for r in replica_pids("CompilerWorkers") for p in _children(r)}
    with ThreadPoolExecutor(1) as background:
        in_flight = background.submit(grpc_client.optimize, slow_module(), bypass_cache=True, deadline_s=90)
        time.sleep(1.0)  # the long call is in the ingress (and compiling) when the crashers arrive
        for crasher in aborting_crashers(2):
            with pytest.raises(CallError) as refused:
                grpc_client.optimize(crasher, bypass_cache=True, deadline_s=30)
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT, refused.value
            assert "LLVM failed while reading the IR" in refused.value.message, refused.value.message
            assert "assertion failed" in refused.value.message  # LLVM's own words, from the worker
        answer = in_flight.result(timeout=150)  # the call in flight on the same ingress was answered
    assert answer.best.cost <= answer.oz_cost
    assert replica_pids("Ingress") == ingress  # the ingress never crashed
    workers_after = {p for r in replica_pids("CompilerWorkers") for p in _children(r)}
    assert workers_before - workers_after, "a worker that read a crasher should have been replaced"
    assert grpc_client.optimize(add_ir, bypass_cache=True, deadline_s=60).best.cost > 0


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.Error:
        return []
