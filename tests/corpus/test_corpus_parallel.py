"""The process runner: every item is done once, and an item that kills its process fails alone."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from optserve.corpus.parallel import ProcessRunner, RayRunner, TaskFailure


def square_or_die(item: int) -> int:
    if item == 7:
        os.abort()  # what LLVM does on some IR
    if item == 11:
        raise ValueError("bad input")
    return item * item


def test_all_items_done_once_and_failures_contained():
    results = dict(ProcessRunner(workers=2, window_per_worker=2).run(square_or_die, range(20)))
    assert sorted(results) == list(range(20))
    assert isinstance(results[7], TaskFailure) and results[7].kind == "crash"
    assert isinstance(results[11], TaskFailure) and results[11].kind == "error"
    assert "bad input" in results[11].message
    assert all(results[i] == i * i for i in range(20) if i not in (7, 11))


def test_stopping_early_leaves_no_workers_behind():
    results = ProcessRunner(workers=2).run(square_or_die, range(1000))
    first = next(results)
    results.close()
    assert first[1] == first[0] ** 2
    deadline = time.monotonic() + 20
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert multiprocessing.active_children() == []


def sleep_long_unless_first(item: int) -> int:
    if item:
        time.sleep(60)  # a whole translation unit's search: far longer than the caller wants to wait
    return item


def test_stopping_early_does_not_wait_for_long_running_tasks():
    results = ProcessRunner(workers=2, window_per_worker=1).run(sleep_long_unless_first, range(4))
    assert next(results) == (0, 0)
    started = time.monotonic()
    results.close()
    while multiprocessing.active_children() and time.monotonic() - started < 20:
        time.sleep(0.1)
    assert multiprocessing.active_children() == [] and time.monotonic() - started < 20


@pytest.mark.slow  # starts a local Ray cluster
def test_ray_runner_does_every_item_once_and_contains_a_crash():
    import ray

    # Ray workers import this test module by name: give them its directory. "local": a Ray of its own, never
    # the cluster another test folder running beside this one wrote to /tmp/ray/ray_current_cluster.
    ray.init(
        "local", runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}}, log_to_driver=False
    )
    try:
        results = dict(RayRunner("local").run(square_or_die, range(12)))
    finally:
        ray.shutdown()
    assert sorted(results) == list(range(12))
    assert isinstance(results[7], TaskFailure) and results[7].kind == "crash"
    assert isinstance(results[11], TaskFailure) and results[11].kind == "error"
    assert all(results[i] == i * i for i in range(12) if i not in (7, 11))
