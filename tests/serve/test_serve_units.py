"""Whole units in the Optimize flow: a pass list per function, linked back and run, and the ingress's split of
a unit, which ends at the deadline or when the request is given up (Ray-free Optimizer, real compiles)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from optserve.compiler.cost import text_size
from optserve.compiler.function_lists import defined_function_count, split_unit
from optserve.compiler.ir import split_functions
from optserve.compiler.passes import format_pass_list
from optserve.compiler.unit_search import REFINE_PASSES
from optserve.config import Settings
from optserve.deadline import Deadline, StoppedError
from optserve.engine.coreset import Coreset
from optserve.serve import schemas
from optserve.serve.errors import ErrorKind, ServiceError
from optserve.testing.service import slow_module
from tests.serve.flow_helpers import ScriptedGenerator, optimize

UNIT_PROGRAM = Path(__file__).resolve().parent.parent / "data" / "units" / "calc.c"


def unit_program_ir() -> str:
    """A whole C program of several functions, compiled to IR as optcc compiles a unit."""
    command = ["clang-19", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-S", "-w", "-o", "-"]
    return subprocess.run([*command, str(UNIT_PROGRAM)], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def unit_ir() -> str:
    return unit_program_ir()


def _run_object(object_code: bytes, directory: Path) -> str:
    (directory / "unit.o").write_bytes(object_code)
    subprocess.run(["clang-19", str(directory / "unit.o"), "-o", str(directory / "unit")], check=True)
    return subprocess.run([str(directory / "unit")], check=True, capture_output=True, text=True).stdout


def test_a_unit_of_several_functions_gets_a_list_per_function_and_its_object_runs(pool, unit_ir, tmp_path):
    settings = Settings.model_validate({"engine": {"unit_function_lists": 3, "coreset_lists_with_model": 0}})
    request = schemas.OptimizeRequest(
        ir=unit_ir, objective="text_size", return_object=True, bypass_cache=True
    )
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    (per_function,) = [c for c in response.candidates if c.source == "per_function"]
    assert set(per_function.function_passes) == set(split_unit(unit_ir).functions)
    allowed = {"-Oz"} | {format_pass_list(p) for p in Coreset.load(settings.engine.coreset_path).first(
        "text_size", 3)}  # fmt: skip
    assert set(per_function.function_passes.values()) <= allowed and per_function.pipeline == ""
    # On this program one function's own list beats -Oz: the linked unit is the answer, and it runs.
    assert response.best.source == "per_function" and response.best.cost < response.oz_cost
    assert text_size(response.object_code) == response.best.cost
    subprocess.run(
        ["clang-19", "-O0", "-w", str(UNIT_PROGRAM), "-o", str(tmp_path / "reference")], check=True
    )
    expected = subprocess.run(
        [str(tmp_path / "reference")], check=True, capture_output=True, text=True
    ).stdout
    assert _run_object(response.object_code, tmp_path) == expected
    again = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    assert again.candidates == response.candidates  # deterministic


def test_refined_per_function_lists_append_one_pass_and_the_object_runs(pool, unit_ir, tmp_path):
    settings = Settings.model_validate(
        {"engine": {"unit_function_lists": 3, "unit_function_refine": True, "coreset_lists_with_model": 0}}
    )
    request = schemas.OptimizeRequest(
        ir=unit_ir, objective="text_size", return_object=True, bypass_cache=True
    )
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    (per_function,) = [c for c in response.candidates if c.source == "per_function"]
    coreset = [("-Oz",), *Coreset.load(settings.engine.coreset_path).first("text_size", 3)]
    allowed = {format_pass_list(p) for p in coreset}
    allowed |= {format_pass_list((*p, extra)) for p in coreset for extra in REFINE_PASSES}
    assert set(per_function.function_passes) == set(split_unit(unit_ir).functions)
    assert set(per_function.function_passes.values()) <= allowed
    plain = optimize(
        ScriptedGenerator([("-Oz",)]),
        pool,
        request,
        settings=Settings.model_validate(
            {"engine": {"unit_function_lists": 3, "coreset_lists_with_model": 0}}
        ),
    )
    assert response.best.cost <= plain.best.cost  # on this program refining keeps or improves the answer
    reference = tmp_path / "reference"
    subprocess.run(["clang-19", "-O0", "-w", str(UNIT_PROGRAM), "-o", str(reference)], check=True)
    expected = subprocess.run([str(reference)], check=True, capture_output=True, text=True).stdout
    assert _run_object(response.object_code, tmp_path) == expected


def test_per_function_lists_can_be_switched_off_and_skip_a_single_function(pool, unit_ir, add_ir):
    off = Settings.model_validate({"engine": {"unit_function_lists": 0}})
    response = optimize(
        ScriptedGenerator([("-Oz",)]), pool, schemas.OptimizeRequest(ir=unit_ir), settings=off
    )
    assert "per_function" not in {c.source for c in response.candidates}
    response = optimize(ScriptedGenerator([("-Oz",)]), pool, schemas.OptimizeRequest(ir=add_ir))
    assert "per_function" not in {c.source for c in response.candidates}


def test_the_coreset_strategy_also_gets_a_list_per_function(pool, unit_ir):
    # optcc sends units longer than the model's context with strategy coreset (clients/settings.py)
    settings = Settings.model_validate({"engine": {"unit_function_lists": 3}})
    request = schemas.OptimizeRequest(ir=unit_ir, objective="text_size", strategy="coreset", samples=2)
    response = optimize(ScriptedGenerator([]), pool, request, settings=settings)
    sources = [c.source for c in response.candidates]
    assert sources.count("coreset") == 2 and sources.count("per_function") == 1
    assert response.best.source == "per_function" and response.best.cost < response.oz_cost


def test_a_unit_of_more_functions_than_the_limit_gets_no_per_function_candidate(pool, unit_ir):
    functions = defined_function_count(unit_ir)
    request = schemas.OptimizeRequest(ir=unit_ir, objective="text_size", bypass_cache=True)
    for limit, expected in ((functions - 1, 0), (functions, 1)):
        settings = Settings.model_validate(
            {"engine": {"unit_function_lists": 3, "unit_function_lists_max_functions": limit}}
        )
        response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
        assert [c.source for c in response.candidates].count("per_function") == expected, limit


def test_per_function_work_on_a_unit_of_many_functions_ends_at_the_deadline(pool):
    """1,200 functions, the limit lifted: 13,200 compiles do not fit 10 s. The request ends at its deadline
    with the per-function candidate left out (or, on a machine too loaded for even -Oz, DEADLINE_EXCEEDED)."""
    settings = Settings.model_validate(
        {"engine": {"unit_function_lists": 10, "unit_function_lists_max_functions": 5000}}
    )
    request = schemas.OptimizeRequest(ir=slow_module(), deadline_s=10, bypass_cache=True)
    started = time.monotonic()
    try:
        response = optimize(ScriptedGenerator([("-Oz",)]), pool, request, settings=settings)
    except ServiceError as err:
        assert err.kind is ErrorKind.DEADLINE_EXCEEDED and "-Oz" in err.message, err
    else:
        assert response.deadline_hit and "per_function" not in {c.source for c in response.candidates}
    elapsed = time.monotonic() - started
    assert elapsed < 10 + 2.0, elapsed  # the deadline, BACKEND_GRACE_S and a loaded machine's slack


def test_a_split_asks_stop_before_each_function_and_ends_when_told(unit_ir):
    asked = []

    def stop_at_the_third_question() -> bool:
        asked.append(True)
        return len(asked) >= 3

    for split in (split_unit, split_functions):
        asked.clear()
        with pytest.raises(StoppedError):
            split(unit_ir, stop=stop_at_the_third_question)
        assert len(asked) == 3, split
    assert split_unit(unit_ir, stop=lambda: False) == split_unit(unit_ir)  # never told: the same parts
    assert split_functions(unit_ir, stop=lambda: False) == split_functions(unit_ir)


@pytest.mark.parametrize("split", [split_unit, split_functions])
def test_the_services_split_of_a_long_unit_ends_at_the_deadline(pool, split):
    """The service splits in a compiler worker (`CompilerPool.run`), never in the ingress: at the request's
    deadline the worker is killed, so the split of the 1,200-function slow_module (1.3 s here, seconds under
    load) does not run on after its answer, and the call ends at once."""
    ir = slow_module()
    started = time.monotonic()
    asyncio.run(pool.run_async(split, ir))
    whole_s = time.monotonic() - started
    started = time.monotonic()
    with pytest.raises(StoppedError):
        asyncio.run(pool.run_async(split, ir, deadline=Deadline(started + 0.1 * whole_s)))
    stopped_s = time.monotonic() - started
    assert stopped_s < 0.5 * whole_s, (stopped_s, whole_s)
    assert asyncio.run(pool.run_async(split, unit_program_ir())) == split(unit_program_ir())  # pool recovered


def test_the_services_split_of_a_request_given_up_ends_then(pool):
    """Cancelled (the answer went back without it: -Oz failed, the caller left), with no deadline: the
    worker splitting is killed and replaced."""
    ir = slow_module()
    started = time.monotonic()
    split_unit(ir)
    whole_s = time.monotonic() - started
    busy_before = pool.worker_pids()

    async def given_up_after(seconds: float) -> None:
        split = asyncio.ensure_future(pool.run_async(split_unit, ir))
        await asyncio.sleep(seconds)
        split.cancel()
        with pytest.raises(asyncio.CancelledError):
            await split

    started = time.monotonic()
    asyncio.run(given_up_after(0.1 * whole_s))
    stopped_s = time.monotonic() - started
    assert stopped_s < 0.5 * whole_s, (stopped_s, whole_s)
    deadline = time.monotonic() + 30
    while pool.idle_workers() < pool.processes and time.monotonic() < deadline:
        time.sleep(0.01)  # the killed worker's successor starts in the background
    assert pool.worker_pids() != busy_before  # the split's worker was killed, not left running
