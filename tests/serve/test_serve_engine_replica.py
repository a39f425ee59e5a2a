"""The engine replica (serve/replicas/deployments.py `PassOrderingEngine`, run as its plain class): a missing
model directory is reported, not fatal; a dead engine answers UNAVAILABLE and fails the health check."""

from __future__ import annotations

import asyncio

import pytest

from optserve.engine.backend import DecoderDeadError
from optserve.engine.interface import SamplingOptions
from optserve.serve.errors import ErrorKind, ServiceError
from optserve.serve.replicas.deployments import PassOrderingEngine


def _replica(model_dir) -> PassOrderingEngine.func_or_class:
    return PassOrderingEngine.func_or_class({"engine": {"model_dir": str(model_dir)}})


def test_a_missing_model_directory_is_reported_not_fatal(tmp_path):
    replica = _replica(tmp_path / "absent")
    metadata = replica.metadata()
    assert not metadata.ready and str(tmp_path / "absent") in metadata.reason
    with pytest.raises(ServiceError) as caught:
        asyncio.run(replica.generate("", SamplingOptions(), None))
    assert caught.value.kind is ErrorKind.UNAVAILABLE


class _DeadEngine:
    """An engine whose backend process died: every call says so."""

    model_id = "dead-model"

    async def generate(self, ir, options, feedback):
        raise DecoderDeadError("the vLLM engine core or its worker process died")

    async def check_health(self):
        raise DecoderDeadError("the vLLM engine core or its worker process died")


def test_a_dead_engine_answers_unavailable_and_fails_the_health_check(tmp_path):
    replica = _replica(tmp_path / "absent")
    asyncio.run(replica.check_health())  # a model that never loaded is no reason to replace the replica
    replica.engine, replica.reason = _DeadEngine(), ""
    with pytest.raises(ServiceError) as caught:
        asyncio.run(replica.generate("", SamplingOptions(), None))
    assert caught.value.kind is ErrorKind.UNAVAILABLE and "died" in caught.value.message
    metadata = replica.metadata()
    assert not metadata.ready and "died" in metadata.reason and "restarted" in metadata.reason
    with pytest.raises(RuntimeError, match="died"):
        asyncio.run(replica.check_health())
