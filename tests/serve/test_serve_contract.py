"""The HTTP API keeps its OpenAPI contract: schemathesis `--checks all` against the running service finds
nothing, and the document states the constraints and limits the server enforces.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from optserve.testing.service import TOKEN

REPO = Path(__file__).resolve().parents[2]
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# 11 indices, 11 loops: one more than looptune.max_loops allows
_ELEVEN = "abcdefghijk"
_ELEVEN_LOOPS = {"einsum": f"C[a] += A[{','.join(_ELEVEN)}] * B[a]", "sizes": dict.fromkeys(_ELEVEN, 1)}


@pytest.fixture
def document(http) -> dict:
    return http.get("/openapi.json").json()


def _body_validator(document: dict, name: str) -> Draft202012Validator:
    """Validates a request body against the served document's schema `name` (its $refs resolve)."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return Draft202012Validator(schema)


def test_schemathesis_finds_no_contract_failures(service, tmp_path):
    """Its default phases (examples, coverage: boundary values such as empty strings and map keys, fuzzing,
    stateful), every check; bounded by `--max-examples` and the timeout."""
    endpoints, _ = service
    command = [
        str(SCHEMATHESIS), "--config-file", str(REPO / "schemathesis.toml"),
        "run", f"{endpoints.http_url}/openapi.json", "--checks", "all",
        "--header", f"authorization: Bearer {TOKEN}",
        "--max-examples", "10", "--seed", "21", "--no-color", "--request-timeout", "60",
    ]  # fmt: skip
    # Its own folder: schemathesis keeps state (.schemathesis/, .hypothesis/) where it runs.
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    # Every case passed. A warning may stand beside that: Optimize "mostly rejected generated data", as
    # text that is not LLVM IR is schema-valid and refused 400 (schemathesis.toml says why).
    counts = re.search(r"(\d+) generated, (\d+) passed", done.stdout)
    assert counts and counts[1] == counts[2] and int(counts[1]) > 0, done.stdout[-3000:]
    assert "FAILURES" not in done.stdout and "Failures:" not in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(
    ("schema", "body"),
    [
        ("OptimizeRequest", {}),
        ("OptimizeRequest", {"ir": None}),
        ("OptimizeRequest", {"ir": "x", "ir_bitcode": "eA=="}),
        ("OptimizeRequest", {"ir": "x", "samples": 2}),  # greedy draws one
        ("OptimizeRequest", {"ir": "x", "strategy": "priority", "samples": 21}),  # engine.max_samples: 20
        ("OptimizeRequest", {"ir": "x", "seed": 2**32}),
        ("OptimizeRequest", {"ir": "x", "baseline_cost": 0}),
        ("OptimizeRequest", {"ir": "x", "baseline_cost": None}),
        ("ScheduleRequest", {"einsum": "", "sizes": {}}),
        ("ScheduleRequest", {"einsum": "C[m,n] = A[m,k] * B[k,n]", "sizes": {"m": 8}}),
        ("ScheduleRequest", {"einsum": "C[m] += A[m] * B[m]", "sizes": {"m": 0}}),
        ("ScheduleRequest", {"einsum": "C[m] += A[m] * B[m]", "sizes": {"m": 8}, "method": "beam9"}),
        # what schemathesis' coverage phase found accepted by the schema but refused (issue 38): empty or
        # blank IR, NUL in IR text, empty bitcode, dimensions without an index, an index name that is none
        ("OptimizeRequest", {"ir": ""}),
        ("OptimizeRequest", {"ir": " \n\t"}),
        ("OptimizeRequest", {"ir": "define void @f() {\n  ret void\n}\n\0"}),
        ("OptimizeRequest", {"ir_bitcode": ""}),
        ("ScheduleRequest", {"einsum": "A[]+=A[]*A[]", "sizes": {"": 2}}),
        ("ScheduleRequest", {"einsum": "C[m] += A[m] * B[m]", "sizes": {"m": 8, "": 2}}),
        ("ScheduleRequest", {"einsum": "C[m] += A[m] * B[m]", "sizes": {"m": 8, "2k": 2}}),
        ("ScheduleRequest", {"einsum": "C[m] += A[1] * B[m]", "sizes": {"m": 8}}),
        ("ScheduleRequest", {"einsum": "C[m+k] += A[m] * B[k]", "sizes": {"m": 8, "k": 8}}),
        ("ScheduleRequest", _ELEVEN_LOOPS),
    ],
)
def test_bodies_the_server_refuses_are_invalid_by_the_schema(document, http, schema, body):
    assert not _body_validator(document, schema).is_valid(body)
    path = "/v1/optimize" if schema == "OptimizeRequest" else "/v1/schedule"
    assert http.post(path, json=body).status_code == 400


def test_the_documented_examples_are_valid_and_answered(document, http):
    for schema, path in (("OptimizeRequest", "/v1/optimize"), ("ScheduleRequest", "/v1/schedule")):
        (example,) = document["components"]["schemas"][schema]["examples"]
        assert _body_validator(document, schema).is_valid(example)
        assert http.post(path, json=example).status_code == 200


def test_responses_are_documented_as_sent(document):
    paths = document["paths"]
    assert "404" in paths["/v2/models/{name}"]["get"]["responses"]
    assert "404" in paths["/v2/models/{name}/ready"]["get"]["responses"]
    assert list(paths["/metrics"]["get"]["responses"]["200"]["content"]) == ["text/plain"]
    assert all("422" not in operation["responses"] for item in paths.values() for operation in item.values())
