"""A cold unit's cost: clang's front end runs once, the service call runs beside clang's back end, units whose
budget cannot pay for a service call (or that have no code to shrink) are not sent, and a unit that is sent
never imports the full Python client. Real clang-19, a real service (the session's) behind a relay that
counts connections."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import grpc
import pytest

from optserve.clients import elf
from tests.clients.clients_helpers import CountingProxy, fake_optimize_service
from tests.clients.test_clients_never_larger import C_SOURCES, OPTCC

# Warnings in the front end (an unused variable) and code in the back end; a header for the dependency file.
SOURCE = """#include "unit.h"
int scaled(int x) { int unused; for (int k = 0; k < LIMIT; k++) x = x * 3 + k; return x; }
"""


def optcc(folder: Path, flags: list[str], source: str = "unit.c", **env: str):
    """optcc -Oz FLAGS -c SOURCE -o unit.o in `folder` (a TMPDIR of its own: one build); (result, records)."""
    log = folder / "optcc.jsonl"
    log.unlink(missing_ok=True)
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    environment = os.environ | {"TMPDIR": str(tmp), "OPTCC_LOG": str(log)} | env
    result = subprocess.run(
        [OPTCC, "-Oz", *flags, "-c", source, "-o", "unit.o"],
        cwd=folder, env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result, [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def proxy(optserve_target):
    relay = CountingProxy(optserve_target)
    yield relay
    relay.close()


@pytest.fixture
def unit(tmp_path) -> Path:
    (tmp_path / "unit.h").write_text("#define LIMIT 7\n")
    (tmp_path / "unit.c").write_text(SOURCE)
    return tmp_path


def test_clangs_front_end_runs_once_and_its_object_dependencies_and_warnings_are_clangs(unit):
    """Clang's object is made from the IR step's bitcode: clang parses the source once (not twice, as
    compiling beside the IR step did), and the object, the -MD -MP dependency file and the warnings are those
    of `clang-19 -Oz -c` itself."""
    calls = unit / "clang-calls"
    counting = unit / "counting-clang"
    counting.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec clang-19 "$@"\n')
    counting.chmod(0o755)
    flags = ["-Wall", "-MD", "-MP"]
    result, [record] = optcc(unit, flags, OPTCC_CLANG=str(counting), OPTCC_SERVER="127.0.0.1:1")
    assert record["outcome"] == "fallback"  # no service: clang's object
    compiles = calls.read_text().splitlines()
    assert len(compiles) == 2 and sum("unit.c" in c.split() for c in compiles) == 1, compiles
    mine, dependencies = (unit / "unit.o").read_bytes(), (unit / "unit.d").read_text()
    plain = subprocess.run(
        ["clang-19", "-Oz", *flags, "-c", "unit.c", "-o", "unit.o"],
        cwd=unit, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert mine == (unit / "unit.o").read_bytes()
    assert dependencies == (unit / "unit.d").read_text() and "unit.h:" in dependencies
    assert "-Wunused-variable" in plain.stderr
    assert result.stderr.count("-Wunused-variable") == plain.stderr.count("-Wunused-variable")


# Clang's back end (its compile of the IR step's bitcode, `-x ir`) made 1.5 s slower, and a service that takes
# as long to answer (then fails): side by side the unit takes about 1.5 s more than its front end; one after
# the other, 3 s.
SLOW_S = 1.5


@pytest.fixture
def slow_service():
    """host:port of a gRPC service that answers Optimize after SLOW_S with INTERNAL (not tried again)."""

    def optimize(request, context):
        time.sleep(SLOW_S)
        context.abort(grpc.StatusCode.INTERNAL, "no answer (a test's service)")

    with fake_optimize_service(optimize) as target:
        yield target


def test_the_service_is_asked_while_clangs_back_end_still_runs(unit, slow_service):
    """The bitcode goes to the service as soon as clang's front end has written it, so the call and clang's
    back end run side by side (the log's timestamps, seconds since the unit's start: asked after the front
    end, before the back end ended) and the unit takes the longer of the two, not their sum."""
    slow_clang = unit / "slow-back-end-clang"
    back_end_waits = f'case " $* " in *" -x ir "*) sleep {SLOW_S};; esac'
    slow_clang.write_text(f'#!/bin/sh\n{back_end_waits}\nexec clang-19 "$@"\n')
    slow_clang.chmod(0o755)
    env = {"OPTCC_SERVER": slow_service, "OPTCC_CLANG": str(slow_clang), "OPTCC_CACHE": "0"}
    _, [record] = optcc(unit, [], OPTCC_BUDGET="0", **env)  # budget 0: every unit sent
    assert record["outcome"] == "fallback" and "INTERNAL" in record["reason"]
    assert record["service_s"] >= SLOW_S and record["clang_s"] - record["ir_step_s"] >= SLOW_S
    assert record["seconds"] < record["clang_s"] + record["service_s"] - SLOW_S / 2
    assert record["ir_step_s"] <= record["asked_s"] < record["clang_s"] - SLOW_S / 2
    assert (unit / "unit.o").read_bytes() == clang_object(unit, "unit.c")


@pytest.mark.parametrize("budget", [{}, "default"], ids=["every unit sent", "default budget"])
def test_an_error_in_the_source_fails_as_clangs_compile_does(unit, budget):
    """Through the IR step (budget 0, conftest's) or clang's one-step compile first (the default budget)."""
    (unit / "broken.c").write_text("int f(void) { return missing; }\n")
    environment = os.environ | {"OPTCC_SERVER": "127.0.0.1:1", "TMPDIR": str(unit)}
    environment |= DEFAULT_BUDGET if budget == "default" else budget
    mine = subprocess.run(
        [OPTCC, "-Oz", "-c", "broken.c", "-o", "broken.o"], cwd=unit, env=environment, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    plain = subprocess.run(
        ["clang-19", "-Oz", "-c", "broken.c", "-o", "broken.o"], cwd=unit, capture_output=True, text=True
    )
    assert mine.returncode == plain.returncode != 0
    assert mine.stderr.count("undeclared identifier 'missing'") == 1 and not (unit / "broken.o").exists()


@pytest.mark.slow
def test_a_unit_whose_budget_cannot_pay_for_a_call_is_not_sent(unit, proxy):
    """OPTCC_BUDGET times the unit's front end, less what a call costs beyond its deadline
    (OPTCC_CALL_OVERHEAD), below OPTCC_BUDGET_MIN: the unit keeps clang's object and opens no connection to
    the service; the outcome is stored, so the rebuild comes from the cache."""
    env = {"OPTCC_SERVER": proxy.target, "OPTCC_BUDGET": "0.5", "OPTCC_CALL_OVERHEAD": "0.4"}
    _, [record] = optcc(unit, [], OPTCC_CACHE="0", **env)
    assert (record["outcome"], record["winner"]) == ("not_asked", "clang")
    assert "below OPTCC_BUDGET_MIN" in record["reason"] and proxy.connections == 0
    assert (unit / "unit.o").read_bytes() == clang_object(unit, "unit.c")
    # the same unit with the default minimum and no overhead taken off is sent
    _, [sent] = optcc(unit, [], OPTCC_CACHE="0", **env | {"OPTCC_BUDGET": "1000", "OPTCC_CALL_OVERHEAD": "0"})
    assert sent["outcome"] == "service" and proxy.connections >= 1
    # cached: the rebuild of a unit not sent is a hit
    optcc(unit, [], **env)
    _, [hit] = optcc(unit, [], **env)
    assert (hit["outcome"], hit["from_cache"]) == ("not_asked", True)


@pytest.mark.slow
def test_a_unit_without_code_is_not_sent(tmp_path, proxy):
    """A table and no function: clang's object has no `.text` to make smaller (objective text_size). Known
    only once clang's object exists: when the service is asked after it, to be told clang's size."""
    (tmp_path / "table.c").write_text("const int table[4] = {1, 2, 3, 5};\n")
    env = {"OPTCC_SERVER": proxy.target, "OPTCC_BUDGET": "1000", "OPTCC_CACHE": "0"}
    env["OPTCC_CLANG_BASELINE"] = "1"
    _, [record] = optcc(tmp_path, [], "table.c", **env)
    assert record["outcome"] == "not_asked" and "no code" in record["reason"]
    assert proxy.connections == 0 and elf.text_size((tmp_path / "unit.o").read_bytes()) == 0


@pytest.mark.slow
def test_a_unit_sent_to_the_service_imports_grpc_but_not_the_full_python_client(tmp_path, optserve_target):
    """The call costs optcc gRPC and the generated messages, not clients/python/client.py (pydantic, asyncio
    client, health stubs), which cost ~0.13 s of CPU per unit sent (docs/bench/clients.md)."""
    source = C_SOURCES / "floating.c"
    environment = os.environ | {"OPTCC_SERVER": optserve_target, "OPTCC_CACHE": "0", "TMPDIR": str(tmp_path)}
    environment["OPTCC_LOG"] = str(tmp_path / "optcc.jsonl")
    done = subprocess.run(
        [OPTCC.with_name("python"), "-X", "importtime", "-m", "optserve.clients.optcc", "-Oz", "-c",
         str(source), "-o", str(tmp_path / "unit.o")],
        env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    [record] = [json.loads(line) for line in (tmp_path / "optcc.jsonl").read_text().splitlines()]
    assert record["outcome"] == "service"
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "grpc" in imported and "optserve.v1.optserve_pb2" in imported
    assert not imported & {"optserve.clients.python.client", "optserve.clients.python.channel", "pydantic"}


# The default budget (2 x the front end, less 0.4 s for the call, at least 0.2 s): a call needs 0.3 s of front
# end. conftest sets OPTCC_BUDGET=0 for the tests that expect an answer; these set the default back.
DEFAULT_BUDGET = {"OPTCC_BUDGET": "2", "OPTCC_CALL_OVERHEAD": "0.4", "OPTCC_BUDGET_MIN": "0.2"}


def counting_clang(folder: Path, sleep_s: float = 0.0) -> tuple[Path, Path]:
    """A clang-19 that notes each command line (and first sleeps `sleep_s`); (the program, its notes)."""
    calls, program = folder / "clang-calls", folder / "counting-clang"
    program.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nsleep {sleep_s}\nexec clang-19 "$@"\n')
    program.chmod(0o755)
    return program, calls


def test_a_unit_too_short_to_send_is_one_clang_compile_with_clangs_object_and_diagnostics(unit):
    """With a budget, clang's own compile runs first; a unit whose whole compile is shorter than the front
    end a call needs (0.3 s by default) cannot be sent (its front end is shorter still): clang runs once, on
    the command itself, and the object, the -MD -MP dependency file and the warnings are clang's, byte for
    byte; the log says why it was not sent. No IR step, no second process."""
    clang, calls = counting_clang(unit)
    flags = ["-Wall", "-MD", "-MP"]
    env = {"OPTCC_CLANG": str(clang), "OPTCC_SERVER": "127.0.0.1:1", **DEFAULT_BUDGET}
    result, [record] = optcc(unit, flags, **env)
    assert (record["outcome"], record["winner"]) == ("not_asked", "clang")
    assert "clang's whole compile took" in record["reason"] and "OPTCC_BUDGET_MIN" in record["reason"]
    assert "ir_step_s" not in record and record["clang_s"] < 0.3
    [command] = calls.read_text().splitlines()
    assert "-emit-llvm" not in command.split() and "unit.c" in command.split()
    mine, dependencies = (unit / "unit.o").read_bytes(), (unit / "unit.d").read_text()
    plain = subprocess.run(
        ["clang-19", "-Oz", *flags, "-c", "unit.c", "-o", "unit.o"],
        cwd=unit, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert mine == (unit / "unit.o").read_bytes()
    assert dependencies == (unit / "unit.d").read_text() and "unit.h:" in dependencies
    assert result.stderr.count("-Wunused-variable") == plain.stderr.count("-Wunused-variable") == 1


@pytest.mark.slow
def test_a_unit_whose_front_end_pays_for_a_call_is_still_sent_after_clangs_compile(unit, proxy):
    """A clang slowed by 0.4 s a process: its one-step compile passes the 0.3 s mark, so optcc runs the IR
    step (its front end, 0.4 s and more: a budget of 2 x that less 0.4 s) and asks the service with that
    deadline, after clang's object exists. The unit goes through the service; its object is never larger
    than clang's."""
    clang, calls = counting_clang(unit, sleep_s=0.4)
    env = {"OPTCC_CLANG": str(clang), "OPTCC_SERVER": proxy.target, "OPTCC_CACHE": "0", **DEFAULT_BUDGET}
    _, [record] = optcc(unit, [], **env)
    assert proxy.connections >= 1 and record["outcome"] in ("service", "fallback"), record
    assert record["clang_s"] >= 0.4 and record["ir_step_s"] >= 0.4
    assert record["deadline_s"] == round(min(10.0, 2 * record["ir_step_s"] - 0.4), 3)
    assert record["asked_s"] >= record["clang_s"] + record["ir_step_s"]
    commands = calls.read_text().splitlines()
    assert len(commands) == 2 and "-emit-llvm" in commands[1].split()
    mine, plain = (unit / "unit.o").read_bytes(), clang_object(unit, "unit.c")
    assert elf.text_size(mine) <= elf.text_size(plain)
    if record.get("winner") != "service":
        assert mine == plain


def clang_object(folder: Path, source: str) -> bytes:
    subprocess.run(["clang-19", "-Oz", "-c", source, "-o", "clang.o"], cwd=folder, check=True, timeout=120)
    return (folder / "clang.o").read_bytes()
