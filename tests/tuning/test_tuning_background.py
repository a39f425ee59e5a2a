"""The service's background tuning: an idle machine gets one recorded unit tuned per step (real Ray tasks
that reserve no CPU, real compiles, a real SQLite store); a busy one gets none."""

from __future__ import annotations

import pytest

from optserve.config import Settings
from optserve.tuning.background import BackgroundTuning, machine_idle
from optserve.tuning.lookup import toolchain_of
from optserve.tuning.store import open_store
from tests.tuning.entries import compile_to_ir
from tests.tuning.test_tuning_tune import SOURCES, record

SETTINGS = Settings.model_validate({"tuning": {"default_budget": 8}})


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "tuning.sqlite3")) as opened:
        record(
            opened, {name: compile_to_ir((SOURCES / name).read_text()) for name in ("loops.c", "switch.c")}
        )
        yield opened


def test_an_idle_machine_gets_one_recorded_unit_tuned_per_step(store, local_ray):
    background = BackgroundTuning(SETTINGS, store, idle=lambda: True)
    first, second, third = background.step(), background.step(), background.step()
    assert (first.units, second.units, third.units) == (1, 1, 0) and first.compiles > 0
    for unit in store.recorded_units():
        toolchain = toolchain_of(unit.ir, "text_size")
        assert store.tuned_budget(unit.ir_hash, toolchain) == SETTINGS.tuning.default_budget


def test_a_step_loads_no_llvm_in_the_process_that_runs_it(store, local_ray, tmp_path):
    # the ingress runs the steps: a fresh driver on the same Ray tunes a unit, its LLVM work all in tasks
    import ray

    from tests.contracts.test_ingress_loads_no_llvm import llvmlite_loaded_by

    code = f"""
        import ray
        from optserve.config import Settings
        from optserve.tuning.background import BackgroundTuning
        from optserve.tuning.store import open_store

        ray.init(address={ray.get_runtime_context().gcs_address!r}, log_to_driver=False)
        settings = Settings.model_validate({SETTINGS.model_dump(include={"tuning"})!r})
        with open_store({str(tmp_path / "tuning.sqlite3")!r}) as store:
            assert BackgroundTuning(settings, store, idle=lambda: True).step().units == 1
    """
    assert llvmlite_loaded_by(code) == []


def test_a_busy_machine_gets_nothing_tuned(store):
    background = BackgroundTuning(SETTINGS, store, idle=lambda: False)
    assert background.step() is None
    assert all(
        store.tuned_budget(u.ir_hash, toolchain_of(u.ir, "text_size")) == 0 for u in store.recorded_units()
    )


def test_idle_is_the_load_average_per_cpu():
    assert machine_idle(idle_load=1e9) and not machine_idle(idle_load=0.0)


def test_the_ingress_starts_it_only_when_the_setting_asks(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from optserve.serve.edges.operations import Operations

    monkeypatch.setenv("OPTSERVE_TUNING_DIR", str(tmp_path))
    engine = SimpleNamespace(metadata=None)
    started = []
    monkeypatch.setattr(BackgroundTuning, "start", lambda self: started.append(self) or self)
    off = Operations(Settings(), engine, None, None, "optserve")
    on = Operations(Settings.model_validate({"tuning": {"background": True}}), engine, None, None, "optserve")
    assert off.background_tuning is None and on.background_tuning is started[0]
