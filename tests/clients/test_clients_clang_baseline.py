"""With OPTCC_CLANG_BASELINE=1 optcc asks the service after clang's compile and tells it the `.text` size of
clang's object (`baseline_cost`): the service then ranks its own -Oz as one more candidate, and sends an
object only for a candidate smaller than clang's; otherwise the unit gets the very object whose size optcc
sent. By default (asked beside clang's back end, no size yet) the service's -Oz is its baseline. Either way
it compiles no unoptimized input. Real clang, the real service (its compile counter at /metrics), real
objects."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from optserve.clients import elf, service_call
from optserve.clients.settings import OptccSettings, ir_step_flags
from optserve.serve.observability.metrics import parse_exposition
from tests.clients.clients_helpers import HTTP_PORT
from tests.clients.test_clients_never_larger import C_SOURCES, DATA, OPTCC, compile_unit

# A budget (the baseline is sent only with one) large enough that this loaded machine never cuts the
# service's answer short.
BUDGETED = {"OPTCC_BUDGET": "1000", "OPTCC_BUDGET_MIN": "0.5", "OPTCC_DEADLINE": "30"}
TOLD = {"OPTCC_CLANG_BASELINE": "1", **BUDGETED}
COMPILES = "optserve_compiler_evaluations_total"


def settled_compiles() -> float:
    """The service's count of compiled candidates once every earlier unit is in it (replicas report every
    2 s: unchanged over 5 s)."""

    def scrape() -> float:
        text = httpx.get(f"http://127.0.0.1:{HTTP_PORT}/metrics", timeout=30).text
        return sum(value for name, _, value in parse_exposition(text) if name == COMPILES)

    value = scrape()
    while True:
        time.sleep(5)
        latest = scrape()
        if latest == value:
            return value
        value = latest


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "flags"),
    [
        (C_SOURCES / "floating.c", ["-Os"]),  # clang-19's -Os is smaller than anything the service has
        (C_SOURCES / "recursion.c", ["-Oz", "-g"]),
        (DATA / "clients" / "wordstat" / "main.c", ["-Oz"]),
    ],
)
def test_told_clangs_size_the_service_still_ranks_its_oz_and_optcc_is_never_larger(
    optserve_target, tmp_path, source: Path, flags
):
    env = {"OPTCC_SERVER": optserve_target, **TOLD}
    mine, clangs, [record] = compile_unit(OPTCC, "clang-19", source, flags, tmp_path, **env)
    assert record["outcome"] == "service" and not record["oz_skipped"] and record["oz_cost"] > 0
    assert record["baseline_cost"] == record["clang_text"] == elf.text_size(clangs)
    assert elf.text_size(mine) <= elf.text_size(clangs)
    if record["winner"] == "clang":  # nothing smaller than clang's: its object, byte for byte
        assert mine == clangs and record["saved_bytes"] == 0 and record["best_source"] == "client_baseline"
        assert record["service_text"] is None or record["service_text"] >= record["clang_text"]
        assert record["oz_cost"] >= record["clang_text"]  # -Oz was compiled and did not beat clang
    else:  # the service sent an object only because it was smaller than clang's
        assert record["service_text"] == elf.text_size(mine) < record["clang_text"]
        assert record["service_text"] <= record["oz_cost"]  # the smallest of -Oz and the model's


@pytest.mark.slow
def test_when_clang_stays_best_its_measured_object_is_written_without_a_second_compile(
    optserve_target, tmp_path
):
    """optcc sends the `.text` size of its own clang compile's object; when the service answers that this
    baseline is best, that object is the unit's: clang runs twice in all (that compile and the IR step)."""
    calls = tmp_path / "clang-calls"
    counting = tmp_path / "counting-clang"
    counting.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec clang-19 "$@"\n')
    counting.chmod(0o755)
    env = {"OPTCC_SERVER": optserve_target, "OPTCC_CLANG": str(counting), "OPTCC_CACHE": "0", **TOLD}
    # floating.c at -Os: clang-19's object is smaller than anything the service has
    mine, clangs, [record] = compile_unit(
        OPTCC, "clang-19", C_SOURCES / "floating.c", ["-Os"], tmp_path, **env
    )
    assert record["winner"] == "clang" and record["best_source"] == "client_baseline"
    assert mine == clangs and record["baseline_cost"] == elf.text_size(mine)
    compiles = calls.read_text().splitlines()
    assert len(compiles) == 2 and sum("-emit-llvm" in c for c in compiles) == 1, compiles


@pytest.mark.slow
def test_optcc_never_has_the_service_compile_the_input(optserve_target, tmp_path):
    """The input's cost only informs, and optcc compares the objects itself: told clang's size or not, the
    service compiles -Oz and the candidates but not the input, one compile less than a plain request."""
    source = DATA / "clients" / "wordstat" / "main.c"
    env = {"OPTCC_SERVER": optserve_target, "OPTCC_CACHE": "0", **BUDGETED}
    compiled = {}
    for told in ("0", "1"):
        before = settled_compiles()
        _, _, [record] = compile_unit(
            OPTCC, "clang-19", source, ["-Oz"], tmp_path, OPTCC_CLANG_BASELINE=told, **env
        )
        assert record["outcome"] == "service" and record["oz_cost"] > 0 and not record["cached"]
        assert record["input_cost"] == -1
        compiled[told] = settled_compiles() - before
    bitcode = tmp_path / "main.bc"
    subprocess.run(["clang-19", *ir_step_flags("oz", "-Oz"), "-c", source, "-o", bitcode], check=True)
    before = settled_compiles()  # the same request as optcc's, with the input's cost wanted
    plain = service_call.optimize(
        optserve_target, bitcode.read_bytes(), objective="text_size", deadline_s=30, return_object=True,
        bypass_cache=True,
    )  # fmt: skip
    assert plain.input_cost > 0
    asked_plainly = settled_compiles() - before
    assert compiled["0"] <= asked_plainly - 1 and compiled["1"] <= asked_plainly - 1


@pytest.mark.parametrize(
    ("env", "sent"),
    [
        ({}, False),  # asked beside clang's back end: no size yet
        ({"OPTCC_CLANG_BASELINE": "1"}, True),
        ({"OPTCC_CLANG_BASELINE": "1", "OPTCC_OBJECTIVE": "instruction_count"}, False),  # no IR to count
        ({"OPTCC_CLANG_BASELINE": "1", "OPTCC_BUDGET": "0"}, False),
    ],
)
def test_clangs_size_is_sent_only_where_the_service_can_compare_it(env, sent):
    settings = OptccSettings.from_environment(env, "clang-19")
    assert settings.sends_clang_baseline is sent
