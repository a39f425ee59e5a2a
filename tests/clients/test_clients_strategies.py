"""One list of strategy names (optserve/strategies.py): it is the proto's `Strategy` enum, the engine decodes
three of them under the same names, and optcc accepts exactly these in OPTCC_STRATEGY."""

from __future__ import annotations

import pytest

from optserve.clients.python.requests import optimize_request
from optserve.clients.settings import ConfigError, OptccSettings
from optserve.engine.interface import Strategy
from optserve.strategies import ServedStrategy
from optserve.v1 import optserve_pb2 as pb


def test_the_served_strategies_are_the_proto_enum():
    names = {n.lower() for n in pb.Strategy.DESCRIPTOR.values_by_name if not n.endswith("_UNSPECIFIED")}
    assert names == {strategy.value for strategy in ServedStrategy}
    for strategy in ServedStrategy:  # and the client sends each as its enum value
        assert pb.Strategy.Name(optimize_request("", strategy=strategy.value).strategy) == strategy.name


def test_the_engine_decodes_served_strategies_under_their_names():
    assert {s.value for s in Strategy} == {"greedy", "priority", "nucleus"}
    assert all(ServedStrategy(s.value).name == s.name for s in Strategy)


@pytest.mark.parametrize("strategy", list(ServedStrategy))
def test_optcc_accepts_every_served_strategy(strategy):
    env = {"OPTCC_STRATEGY": strategy.value.upper()}  # case does not matter
    assert OptccSettings.from_environment(env, "clang-19").strategy == strategy.value


def test_optcc_refuses_a_strategy_the_service_does_not_serve():
    with pytest.raises(ConfigError, match="OPTCC_STRATEGY='beam' is not one of greedy, priority"):
        OptccSettings.from_environment({"OPTCC_STRATEGY": "beam"}, "clang-19")
