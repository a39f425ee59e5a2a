"""Work for the processes of the concurrency tests (importable by a spawned interpreter)."""

from __future__ import annotations

import random
from pathlib import Path

from optserve.tuning.store import open_store
from tests.tuning.entries import function_entry

KEYS = 60
BATCH = 20_000  # entries per offer of the killed writer: a transaction long enough to be caught inside


def offered_cost(worker: int, round_: int, key: int) -> int:
    """The cost worker `worker` offers for key `key` in round `round_`: a fixed pseudo-random number."""
    return random.Random(f"{worker}/{round_}/{key}").randrange(100, 100_000)


def offer_rounds(url: str, worker: int, rounds: int) -> None:
    """Offer every key once per round, in a worker-specific order, one transaction per round."""
    with open_store(url) as store:
        for round_ in range(rounds):
            keys = list(range(KEYS))
            random.Random(f"order {worker}/{round_}").shuffle(keys)
            store.offer(
                [function_entry(f"k{key}", offered_cost(worker, round_, key), compiles=1) for key in keys]
            )
            store.record_unit(
                f"{worker:064x}", f"; unit of worker {worker}, round {round_}\n", f"w{worker}.c"
            )


def commit_then_write_forever(url: str, ready: str) -> None:
    """Commit one batch, say so through the file `ready`, then offer large batches until killed."""
    with open_store(url) as store:
        store.offer([function_entry(f"committed{i}", 50) for i in range(100)])
        Path(ready).write_text("committed")
        batch = 0
        while True:
            batch += 1
            store.offer([function_entry(f"large{batch}/{i}", 40) for i in range(BATCH)])
