"""Several processes writing one store at once, and a writer killed mid-transaction, on each backend."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time

import psycopg

from optserve.tuning.store import open_store
from tests.tuning.entries import TOOLCHAIN, hash_of
from tests.tuning.workers import BATCH, KEYS, commit_then_write_forever, offer_rounds, offered_cost

WORKERS = 4
ROUNDS = 5


def writer_in_transaction(url: str) -> bool:
    """Whether another connection is inside a write transaction on the store (its write lock is taken, or the
    server runs its upsert)."""
    if url.startswith("postgresql://"):
        with psycopg.connect(url, autocommit=True) as connection:
            (active,) = connection.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE state = 'active' AND query LIKE 'INSERT INTO tuned%'"
            ).fetchone()
        return active > 0
    connection = sqlite3.connect(url, timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        connection.close()


def test_concurrent_writer_processes_leave_every_key_at_its_cheapest_offer(store_url):
    # The store does not exist yet: the processes also race to create it.
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=offer_rounds, args=(store_url, w, ROUNDS)) for w in range(WORKERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * WORKERS
    with open_store(store_url) as store:
        found = store.lookup_functions([hash_of(f"k{key}") for key in range(KEYS)], TOOLCHAIN)
        cheapest = {
            hash_of(f"k{key}"): min(offered_cost(w, r, key) for w in range(WORKERS) for r in range(ROUNDS))
            for key in range(KEYS)
        }
        assert {h: entry.cost for h, entry in found.items()} == cheapest
        assert {entry.compiles for entry in found.values()} == {WORKERS * ROUNDS}  # no offer lost
        assert sorted(unit.times_seen for unit in store.recorded_units()) == [ROUNDS] * WORKERS


def test_a_writer_killed_mid_transaction_leaves_earlier_commits_intact(store_url, tmp_path):
    ready = tmp_path / "ready"
    process = multiprocessing.get_context("spawn").Process(
        target=commit_then_write_forever, args=(store_url, str(ready))
    )
    process.start()
    deadline = time.monotonic() + 60
    while not (ready.exists() and writer_in_transaction(store_url)):
        assert time.monotonic() < deadline and process.is_alive(), "the writer never began a large batch"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    with open_store(store_url) as store:
        committed = store.lookup_functions([hash_of(f"committed{i}") for i in range(100)], TOOLCHAIN)
        assert len(committed) == 100
        assert (store.stats().function_entries - 100) % BATCH == 0  # whole batches or nothing
        assert store.offer([committed[hash_of("committed0")]]) == 1  # and it takes writes again
