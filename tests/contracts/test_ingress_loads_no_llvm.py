"""The ingress replica and Ray Serve's proxy load no LLVM: IR is parsed, split and normalized by the
compiler's crash-isolated workers (compiler/workers.py), so llvmlite stays out of the processes that hold
every call.

A runtime check in a fresh interpreter, not an import-linter contract: the ingress's modules may import the
compiler's modules (types, errors, the functions handed to workers by reference), which import llvmlite
inside the functions that call LLVM; import-linter counts those imports too, so it cannot tell a module that
loads LLVM from one that only names a function that does. The served path is checked on the running service
(tests/serve/test_serve_ingress_llvm.py: a feedback round for instruction_count leaves the ingress replica
without LLVM mapped).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# What the ingress replica imports (its deployment, the methods it answers through, the operations and the
# tuning store it opens), and what the proxy imports (serve/app.py GRPC_SERVICER_FUNCTIONS and the HTTP edge).
INGRESS_AND_EDGE_MODULES = (
    "optserve.serve.ingress",
    "optserve.serve.edges.grpc_methods",
    "optserve.serve.edges.http_app",
    "optserve.serve.edges.operations",
    "optserve.serve.edges.grpc_services",
    "optserve.serve.edges.grpc_health",
    "optserve.serve.edges.grpc_edge",
    "optserve.serve.edges.http_edge",
    "optserve.tuning.lookup",
)


def llvmlite_loaded_by(code: str) -> list[str]:
    """The llvmlite modules a fresh interpreter holds after running `code`."""
    probe = "import json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('llvmlite'))))"
    program = f"{textwrap.dedent(code)}\n{probe}\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_ingress_and_the_edges_loads_no_llvmlite():
    imports = "\n".join(f"import {module}" for module in INGRESS_AND_EDGE_MODULES)
    assert llvmlite_loaded_by(imports) == []


def test_the_ingress_store_lookup_loads_no_llvmlite(tmp_path):
    # the lookup the Optimizer runs in an ingress thread: the unit's own key and the store's rows, no parse
    code = f"""
        from optserve.tuning.lookup import whole_unit_answer
        from optserve.tuning.records import Toolchain
        from optserve.tuning.store import open_store

        ir = 'define i32 @f(i32 %x) {{\\n  ret i32 %x\\n}}\\n'
        with open_store({str(tmp_path / "store.sqlite3")!r}) as store:
            whole_unit_answer(store, ir, Toolchain("text_size", "", "20.1.8", "v"))
    """
    assert llvmlite_loaded_by(code) == []


def test_the_check_sees_llvmlite_where_a_module_loads_it():
    # the check can fail: the compiler's parse, as a worker runs it, loads LLVM
    code = """
        from optserve.compiler.ir import parse_ir

        parse_ir("define void @f() {\\n  ret void\\n}\\n", 1000)
    """
    assert "llvmlite.binding" in llvmlite_loaded_by(code)
