"""Record now, read later on the real service: optcc's request (strategy stored, bitcode, the client
compares) for a unit the session's tuning store can hold nothing for is answered without a read or a
compile, and its bitcode waits in the store, unread, for `optserve tune`."""

from __future__ import annotations

import hashlib
import subprocess
import time

import pytest

from optserve.tuning.keys import llvm_version, vocabulary_version
from optserve.tuning.store import open_store
from optserve.v1 import optserve_pb2 as pb

SOURCE = "int unread_{tag}(int x) {{ return x * {tag} + 1; }}\nint twice_{tag}(int y) {{ return 2 * y; }}\n"
OBJECTIVE = "instruction_count"  # the session's other tests store text_size entries


def bitcode_of(source: str, folder) -> bytes:
    (folder / "unit.c").write_text(source)
    command = ["clang-19", "-g", "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", "-w"]
    subprocess.run([*command, "unit.c", "-o", "unit.bc"], cwd=folder, check=True)
    return (folder / "unit.bc").read_bytes()


def test_a_first_build_unit_is_recorded_unread_with_no_compile(client, tmp_path):
    with open_store() as store:  # the service's store (tests/conftest.py: this session's own)
        if store.holds_entries(OBJECTIVE, llvm_version(), vocabulary_version()):
            pytest.skip(f"the session's store holds {OBJECTIVE} entries: the unit would be read")
    bitcode = bitcode_of(SOURCE.format(tag=tmp_path.name.count("_") + 7), tmp_path)
    options = {"objective": OBJECTIVE, "strategy": "stored", "client_compares": True,
               "skip_input_cost": True, "return_object": True, "unit_name": "unread.c"}  # fmt: skip
    response = client.optimize(bitcode, **options)
    assert [c.source for c in response.candidates] == [pb.CLIENT_BASELINE] and response.oz_skipped
    assert (response.timings.compile_s, response.timings.validate_s) == (0, 0)
    assert response.tuning.recorded and not response.object_code
    raw = hashlib.sha256(bitcode).hexdigest()
    assert response.ir_sha256 == raw
    with open_store() as store:
        assert store.raw_unit(raw) == (None, None)  # waiting for `optserve tune` to read it
        assert any(unit.raw_hash == raw and unit.name == "unread.c" for unit in store.pending_raw())
    again = client.optimize(bitcode, **options)
    assert not again.tuning.recorded and [c.source for c in again.candidates] == [pb.CLIENT_BASELINE]


def _metric(http, sample: str, **labels: str) -> float:
    """`sample`'s value at /metrics (summed over the replicas), 0 when it has none with `labels`."""
    from optserve.serve.observability.metrics import parse_exposition

    text = http.get("/metrics").text
    found = parse_exposition(text)
    return sum(value for name, have, value in found if name == sample and labels.items() <= have.items())


def _counted(http, sample: str, at_least: float, **labels: str) -> float:
    """`sample`'s value once it reaches `at_least` (replicas report every 2 s), or what it is after 30 s."""
    deadline = time.monotonic() + 30
    while (value := _metric(http, sample, **labels)) < at_least and time.monotonic() < deadline:
        time.sleep(0.5)
    return value


def test_ready_means_warm_the_first_unread_unit_asks_no_compiler_worker(client, http, tmp_path):
    """Each ingress replica asks a compiler worker for the host's toolchain before it is ready
    (`Optimizer.warm`): an optcc unit answered unread, as a first build's first units are, waits for none of
    that first-use work (the toolchain was asked at startup, never on a request's path)."""
    with open_store() as store:
        if store.holds_entries(OBJECTIVE, llvm_version(), vocabulary_version()):
            pytest.skip(f"the session's store holds {OBJECTIVE} entries: the unit would be read")
    asks = "optserve_toolchain_asks_total"
    assert _counted(http, asks, 1, when="startup") >= 1  # every replica that started warmed up
    optimizes = _metric(http, "optserve_requests_total", operation="optimize")
    bitcode = bitcode_of(SOURCE.format(tag=tmp_path.name.count("_") + 11), tmp_path)
    options = {"objective": OBJECTIVE, "strategy": "stored", "client_compares": True,
               "skip_input_cost": True, "return_object": True, "unit_name": "warm.c"}  # fmt: skip
    response = client.optimize(bitcode, **options)
    assert [c.source for c in response.candidates] == [pb.CLIENT_BASELINE]
    assert (response.timings.compile_s, response.timings.validate_s) == (0, 0)
    # the replica's counts of this request reported (one report carries all of them), then its asks
    assert _counted(http, "optserve_requests_total", optimizes + 1, operation="optimize") >= optimizes + 1
    assert _metric(http, asks, when="request") == 0
