"""Fixtures: a store of each backend (a SQLite file in a temp dir, and a schema of a real PostgreSQL server
started for the session), and helpers to build entries."""

from __future__ import annotations

import pytest

from optserve.testing.postgres import PostgresServer
from optserve.tuning.store import open_store


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """An empty store's URL, of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "tuning.sqlite3")
    return request.getfixturevalue("postgres_server").fresh_url()


@pytest.fixture
def store(store_url):
    with open_store(store_url) as opened:
        yield opened


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs for `optserve tune`'s tasks (loopback only), shut down after the module."""
    import ray

    from optserve.tuning.cli import connect_ray

    connected = connect_ray(None, 2)
    yield
    if connected:
        ray.shutdown()
