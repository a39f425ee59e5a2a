"""The running service's ingress replica holds no LLVM after serving requests whose work needs LLVM: the
LLVM work runs in compiler workers (tests/contracts/test_ingress_loads_no_llvm.py checks the imports in a
fresh interpreter; this checks the served path).

The check reads the replica's memory map (/proc/<pid>/maps): llvmlite's binding loads its shared library,
libllvmlite.so, when it is imported, so a replica that imported it maps that file.
"""

from __future__ import annotations

from pathlib import Path

from optserve.testing.service import replica_pids
from optserve.v1 import optserve_pb2 as pb


def _maps_llvmlite(pid: int) -> bool:
    return "libllvmlite" in Path(f"/proc/{pid}/maps").read_text()


def test_a_feedback_round_for_instruction_count_loads_no_llvm_in_the_ingress(client, sum_ir):
    # the feedback text compares the model's predicted instruction counts with the input's actual count
    response = client.optimize(
        sum_ir, objective="instruction_count", strategy="priority", samples=3, feedback_rounds=2,
        bypass_cache=True,
    )  # fmt: skip
    assert response.objective == pb.INSTRUCTION_COUNT and response.best.cost <= response.oz_cost
    (ingress,) = replica_pids("Ingress")
    assert not _maps_llvmlite(ingress)


def test_the_check_sees_llvm_where_a_replica_loads_it(client, sum_ir):
    # the check can fail: a compiler replica's worker processes, which compile, map LLVM
    import psutil

    client.optimize(sum_ir, bypass_cache=True)
    replicas = [psutil.Process(pid) for pid in replica_pids("CompilerWorkers")]
    workers = [child.pid for replica in replicas for child in replica.children()]
    assert any(_maps_llvmlite(pid) for pid in workers)
