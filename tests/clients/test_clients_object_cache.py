"""optcc's object cache: a rebuild of unchanged sources reuses each unit's object (real clang, real service);
any change to what makes the object (a header, the model) compiles the unit again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optserve.clients import object_cache
from tests.clients.clients_helpers import CountingProxy

OPTCC = Path(sys.executable).with_name("optcc")
UNITS = ["main.c", "table.c", "text.c", "checksum.c"]


def make(program: Path, *targets: str, **env: str) -> subprocess.CompletedProcess:
    environment = os.environ | {"TMPDIR": str(program.parent)} | env
    return subprocess.run(
        ["make", "-s", f"CC={OPTCC}", "CFLAGS=-Oz", *targets],
        cwd=program, env=environment, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def logged_build(program: Path, name: str, server: str) -> list[dict]:
    """Build `program` from clean with optcc; its OPTCC_LOG records."""
    log = program / f"{name}.jsonl"
    assert make(program, "clean").returncode == 0
    result = make(program, OPTCC_SERVER=server, OPTCC_LOG=str(log))
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def objects(program: Path) -> dict[str, bytes]:
    return {unit: (program / unit).with_suffix(".o").read_bytes() for unit in UNITS}


@pytest.mark.slow
def test_a_rebuild_of_unchanged_sources_comes_from_the_cache(program, optserve_target):
    cold = logged_build(program, "cold", optserve_target)
    cold_objects = objects(program)
    warm = logged_build(program, "warm", optserve_target)
    assert [r.get("from_cache") for r in cold] == [None] * 4
    assert sorted(r["source"] for r in warm if r.get("from_cache")) == sorted(UNITS)
    assert objects(program) == cold_objects
    assert {r["winner"] for r in warm} <= {"service", "clang"}


@pytest.mark.slow
def test_a_changed_header_compiles_its_units_again(program, optserve_target):
    logged_build(program, "cold", optserve_target)
    header = program / "wordstat.h"
    header.write_text(header.read_text() + "\n#define OPTCC_CACHE_TEST 1\n")
    again = logged_build(program, "changed", optserve_target)
    assert [r.get("from_cache") for r in again] == [None] * 4  # every unit includes wordstat.h
    assert all(r.get("from_cache") for r in logged_build(program, "warm", optserve_target))


@pytest.mark.slow
def test_a_hit_writes_the_dependency_file_and_repeats_clangs_warnings(tmp_path, optserve_target):
    source = tmp_path / "warns.c"
    source.write_text("int f(int x) { int unused; return x * 3; }\n")
    env = os.environ | {"TMPDIR": str(tmp_path), "OPTCC_SERVER": optserve_target}
    command = [OPTCC, "-Oz", "-Wall", "-MD", "-c", "warns.c", "-o", "warns.o"]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    dependencies = (tmp_path / "warns.d").read_text()
    (tmp_path / "warns.d").unlink()
    second = subprocess.run(
        [*command], cwd=tmp_path, env=env | {"OPTCC_VERBOSE": "1"}, capture_output=True, text=True
    )
    assert "from optcc's cache" in second.stderr
    assert "unused variable 'unused'" in first.stderr and "unused variable 'unused'" in second.stderr
    assert (tmp_path / "warns.d").read_text() == dependencies == "warns.o: warns.c\n"


@pytest.mark.slow
def test_a_unit_looked_up_under_another_model_misses(program, optserve_target, empty_object_cache):
    """The model is part of the key. The service's answer to the unit that missed names the model it serves,
    so the next units are looked up under that one (and hit); the answer is not stored under the other's."""
    logged_build(program, "cold", optserve_target)
    object_cache.note_model(empty_object_cache, optserve_target, "another-model@0")
    other = logged_build(program, "other", optserve_target)
    assert [r.get("from_cache") for r in other] == [None, True, True, True]
    assert all(r.get("from_cache") for r in logged_build(program, "back", optserve_target))


@pytest.mark.slow
def test_units_that_expand_the_time_of_day_are_never_cached(tmp_path, optserve_target):
    (tmp_path / "stamp.c").write_text('const char *built(void) { return __DATE__ " " __TIME__; }\n')
    log = tmp_path / "log.jsonl"
    env = os.environ | {"TMPDIR": str(tmp_path), "OPTCC_SERVER": optserve_target, "OPTCC_LOG": str(log)}
    for _ in range(2):
        subprocess.run([OPTCC, "-Oz", "-c", "stamp.c"], cwd=tmp_path, env=env, check=True, timeout=300)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["outcome"], r.get("from_cache")) for r in records] == [("service", None)] * 2


def test_without_a_service_nothing_is_cached(program):
    """A fallback (service unreachable, model never seen) is clang's object now, not a cache entry."""
    logged_build(program, "down", "127.0.0.1:1")
    records = logged_build(program, "down-again", "127.0.0.1:1")
    assert {r["outcome"] for r in records} == {"fallback"}


@pytest.fixture
def proxy(optserve_target):
    relay = CountingProxy(optserve_target)
    yield relay
    relay.close()


def compile_once(folder: Path, server: str, step: str, **env: str) -> tuple[dict, str]:
    """optcc -Oz on folder/unit.c (TMPDIR of its own per step: a fresh build); its log record and stderr."""
    log, tmp = folder / f"{step}.jsonl", folder / f"tmp-{step}"
    tmp.mkdir()
    environment = os.environ | {"TMPDIR": str(tmp), "OPTCC_SERVER": server, "OPTCC_LOG": str(log)} | env
    result = subprocess.run(
        [OPTCC, "-Oz", "-c", "unit.c", "-o", "unit.o"],
        cwd=folder, env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    return record, result.stderr


def a_new_unit(folder: Path, functions: int) -> None:
    """A unit no earlier test sent (the service's own result cache would answer its -Oz at once)."""
    token = time.time_ns()
    body = "int s = x; for (int k = 0; k < y; k++) { s += table[(k * %d + x) & 255] ^ (s >> %d); "
    body += "if (s & %d) s = s * 3 + k; else table[k & 255] = s; } return s;"
    lines = ["static int table[256];"] + [
        f"int f{i}_{token}(int x, int y) {{ {body % (i + 3, i % 7 + 1, i + 1)} }}" for i in range(functions)
    ]
    (folder / "unit.c").write_text("\n".join(lines) + "\n")


# A deadline (0.001 x the front end) no -Oz compile of a 200-function unit meets (the service waits
# BACKEND_GRACE_S = 0.25 s past it for its -Oz; clang-19 -Oz takes ~1 s on it): the service answers
# DEADLINE_EXCEEDED itself. Greedy for
# every unit (OPTCC_LARGE_UNIT=0), as the first budgeted runs had it. The service compiles its own -Oz only
# when not given clang's size (OPTCC_CLANG_BASELINE=0); given it, it answers (the next test).
NO_TIME = {
    "OPTCC_BUDGET": "0.001", "OPTCC_BUDGET_MIN": "0.000001", "OPTCC_CALL_OVERHEAD": "0",
    "OPTCC_LARGE_UNIT": "0", "OPTCC_CLANG_BASELINE": "0",
}  # fmt: skip


@pytest.mark.slow
def test_told_clangs_size_a_service_out_of_budget_answers_and_clangs_object_stays(tmp_path, proxy):
    """No -Oz to wait for: the deadline cut is an answer ("nothing smaller"), not a fallback."""
    a_new_unit(tmp_path, 200)
    record, _ = compile_once(tmp_path, proxy.target, "cut", **NO_TIME | {"OPTCC_CLANG_BASELINE": "1"})
    assert (record["outcome"], record["winner"], record["oz_skipped"]) == ("service", "clang", True)
    assert record["deadline_hit"] and record["saved_bytes"] == 0


@pytest.mark.slow
def test_a_unit_whose_budget_ran_out_is_cached_and_a_rebuild_makes_no_service_call(tmp_path, proxy):
    """The budget cut is the outcome of the key's settings: stored with clang's object (record
    `budget_cut`); the rebuild opens no connection to the service and writes the same object."""
    a_new_unit(tmp_path, 200)
    cold, _ = compile_once(tmp_path, proxy.target, "cold", **NO_TIME)
    assert (cold["outcome"], cold.get("budget_cut"), cold.get("from_cache")) == ("fallback", True, None)
    assert "answered DEADLINE_EXCEEDED" in cold["reason"]
    cold_object, cold_connections = (tmp_path / "unit.o").read_bytes(), proxy.connections
    assert cold_connections >= 1
    (tmp_path / "unit.o").unlink()
    warm, stderr = compile_once(tmp_path, proxy.target, "warm", OPTCC_VERBOSE="1", **NO_TIME)
    assert proxy.connections == cold_connections  # no gRPC call, not even for the model
    assert (warm["outcome"], warm["budget_cut"], warm["from_cache"]) == ("fallback", True, True)
    assert "from optcc's cache (clang's object)" in stderr
    assert (tmp_path / "unit.o").read_bytes() == cold_object
    # OPTCC_RECACHE=1 asks the service again (and stores the new outcome); more time is another key.
    again, _ = compile_once(tmp_path, proxy.target, "recache", OPTCC_RECACHE="1", **NO_TIME)
    assert again.get("from_cache") is None and proxy.connections > cold_connections
    more, _ = compile_once(
        tmp_path, proxy.target, "more", **NO_TIME | {"OPTCC_BUDGET": "0", "OPTCC_DEADLINE": "30"}
    )
    assert (more["outcome"], more.get("from_cache")) == ("service", None)


@pytest.mark.slow
def test_a_unit_whose_service_was_unreachable_is_not_cached(tmp_path, proxy, empty_object_cache):
    """Unreachable is not the key's doing: the next build asks the service again."""
    a_new_unit(tmp_path, 1)
    assert object_cache.known_model(empty_object_cache, proxy.target, 60.0) is not None  # the model is known
    proxy.refuse = True
    down, _ = compile_once(tmp_path, proxy.target, "down")
    assert down["outcome"] == "fallback" and not down.get("budget_cut")
    proxy.refuse = False
    seen = proxy.connections
    up, _ = compile_once(tmp_path, proxy.target, "up")
    assert (up["outcome"], up.get("from_cache")) == ("service", None) and proxy.connections > seen


def test_dependency_files_are_read_as_make_reads_them():
    text = "unit.o: unit.c include/a.h \\\n  /usr/include/with\\ space.h \\\n /usr/include/stdio.h\n"
    assert object_cache.parse_dependencies(text) == [
        "unit.c", "include/a.h", "/usr/include/with space.h", "/usr/include/stdio.h",
    ]  # fmt: skip


def test_the_least_recently_used_results_go_first_when_the_cache_is_over_its_size(tmp_path):
    """As ccache's max_size: over the limit, a store's trim removes the results used least recently (a hit
    counts as a use) until they fill 80% of it; an evicted unit is a miss, the others still hit."""
    header = tmp_path / "unit.h"
    header.write_text("int f(void);\n")
    slots = {}
    for age, name in enumerate(["used", "old", "new"]):  # "used" stored first, then hit
        source = tmp_path / f"{name}.c"
        source.write_text(f'#include "unit.h"\nint {name}(void) {{ return 1; }}\n')
        slots[name] = object_cache.Slot(tmp_path / "cache", f"{name:0<64}", "model@1")
        assert slots[name].store(str(source), [str(header)], b"\0" * 1000, b"", None, {"unit": name})
        for record in (tmp_path / "cache" / "results").glob("*/*/record.json"):
            if json.loads(record.read_text())["unit"] == name:
                os.utime(record, (1000.0 + age, 1000.0 + age))  # stored in this order, long ago
    assert slots["used"].lookup().record == {"unit": "used"}  # now the most recently used
    sizes = sum(f.stat().st_size for f in (tmp_path / "cache" / "results").rglob("*") if f.is_file())
    assert object_cache.trim(tmp_path / "cache", sizes + 1) == 0  # under the limit: nothing goes
    removed = object_cache.trim(tmp_path / "cache", sizes - 1)
    assert slots["old"].lookup() is None
    assert slots["used"].lookup() is not None and slots["new"].lookup() is not None
    assert 0 < removed <= sizes // 3 + 1


def test_a_store_trims_at_most_every_so_often(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    assert object_cache.trim_if_due(root, 0) is None  # no limit: never scans
    assert object_cache.trim_if_due(root, 1 << 30) == 0  # first store: scans, nothing to remove
    assert object_cache.trim_if_due(root, 1) is None  # within TRIM_EVERY_S of the last scan
