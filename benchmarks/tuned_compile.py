"""A tuned unit's compile, before and after a change of compiler/: the tuning store's answer for each unit
of a tree (per-function lists linked into one unit, or a whole-unit list) compiled as a compiler worker
compiles it for the service, by a git revision's compiler/ir.py, compiler/pipeline.py and
compiler/function_lists.py and by the working tree's; the objects of both compared byte for byte (a
profile's reproducibility rests on them being equal).

    python benchmarks/tuned_compile.py --store STORE.sqlite3 --tree data/clients/builds/mxml/clang \
        --flags "-g -Os -D_GNU_SOURCE -Oz -D_THREAD_SAFE -D_REENTRANT -D_FORTIFY_SOURCE=2 -I." \
        [--before HEAD] [--runs 5] [--json FILE]
    python benchmarks/tuned_compile.py --store STORE.sqlite3 --tree data/clients/builds/tinyxml2/clang \
        --compiler clang++-19 --glob "tinyxml2.cpp" --flags "-fPIC -Oz"

STORE: a store `optserve tune` tuned these units in (the same flags as the build it recorded, so that the
units hit). Each source is compiled as optcc sends it (--flags, then `-Xclang -disable-llvm-passes
-emit-llvm -c`: bitcode) and read as the service reads it (`parse_ir`); its answer comes from the store as the
service looks it up (tuning/lookup.py). Per unit, --runs compiles of each side in this process (alternating
which goes first), with the object (`want_object`, as optcc asks): the medians of their wall times. The
revision's three modules are loaded from `git show REV:PATH` beside the working tree's (the rest of optserve
is the working tree's). A unit with nothing stored is left out.

--as-sent: a linked rebuild's work in the service's processes, not the compile alone: before, the intake's
read of the bitcode with the unit's key (`parse_ir` and `unit_hash`, as `read_unit`) and the compile of that
text; after, the compile given the bitcode as optcc sent it (`compiler.ir.compile_input`: read once, in the
compile). The objects are compared as without it.
"""

from __future__ import annotations

import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from optserve.compiler import function_lists, pipeline
from optserve.compiler.function_lists import FunctionLists
from optserve.compiler.ir import parse_ir
from optserve.testing.tuned_units import OBJECTIVE, bitcode_of, revision_module, unit_arguments
from optserve.tuning.lookup import functions_answer, toolchain_of, whole_unit_answer
from optserve.tuning.store import open_store
from optserve.tuning.unit_keys import unit_hash, unit_keys


def stored_job(store, ir: str):
    """The store's answer for the unit, as the service finds it (None: nothing stored)."""
    toolchain = toolchain_of(ir, OBJECTIVE)
    answer = whole_unit_answer(store, ir, toolchain)
    if answer is None:
        answer = functions_answer(store, toolchain, unit_keys(ir, 150))
    return answer.job


def compile_with(side, ir: str | bytes, job, read=None):
    """(seconds, object) of `job` compiled by `side` (a pair of modules: function_lists, pipeline), on `ir`,
    or on the text of `read(ir)` (bitcode read as the intake reads it, timed with the compile)."""
    lists, plain = side
    run = lists.apply_function_lists if isinstance(job, FunctionLists) else plain.evaluate
    started = time.perf_counter()
    if read is not None:
        ir = read(ir, 64 * 2**20)
        unit_hash(ir)
    evaluation = run(ir, job, OBJECTIVE, want_object=True)
    seconds = time.perf_counter() - started
    if evaluation.error:
        raise RuntimeError(evaluation.error)
    return seconds, evaluation.object_code


def main() -> int:
    parser = unit_arguments(__doc__.splitlines()[0], runs=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--as-sent", action="store_true", help="intake and compile vs the bytes' compile")
    args = parser.parse_args()
    imports: dict[str, str] = {}
    for path in ("ir", "pipeline", "function_lists"):  # each module with the revision's of those before it
        loaded = revision_module(args.before, f"compiler/{path}.py", f"before_{path}", imports)
        imports[f"optserve.compiler.{path}"] = loaded.__name__
    before = (sys.modules["before_function_lists"], sys.modules["before_pipeline"])
    after = (function_lists, pipeline)
    flags = shlex.split(args.flags)
    result = {}
    with tempfile.TemporaryDirectory(prefix="tuned-compile-") as scratch, open_store(args.store) as store:
        for source in sorted(args.tree.resolve().glob(args.glob)):
            bitcode = bitcode_of(args.compiler, args.tree, source, flags, Path(scratch) / "unit.bc")
            ir = parse_ir(bitcode, 64 * 2**20)
            job = stored_job(store, ir)
            if job is None:
                continue
            times: dict[str, list[float]] = {"before": [], "after": []}
            objects: dict[str, set[bytes]] = {"before": set(), "after": set()}
            for run in range(args.runs):
                order = ("before", "after") if run % 2 == 0 else ("after", "before")
                for name in order:
                    if not args.as_sent:
                        seconds, code = compile_with(before if name == "before" else after, ir, job)
                    elif name == "before":
                        read = sys.modules["before_ir"].parse_ir
                        seconds, code = compile_with(before, bitcode, job, read)
                    else:
                        seconds, code = compile_with(after, bitcode, job)
                    times[name].append(seconds)
                    objects[name].add(code)
            kind = f"{len(job.lists)} function lists" if isinstance(job, FunctionLists) else "unit list"
            result[source.name] = {
                "job": kind,
                "ir_bytes": len(ir),
                "before_ms": round(1000 * statistics.median(times["before"]), 1),
                "after_ms": round(1000 * statistics.median(times["after"]), 1),
                "identical": len(objects["before"] | objects["after"]) == 1,
            }
    head = f"{'unit':<18}{'stored job':<20}{'IR bytes':>10}{'before ms':>11}{'after ms':>10}"
    print(f"{head}{'after/before':>14}  same object")
    for name, row in result.items():
        ratio = row["after_ms"] / row["before_ms"]
        print(
            f"{name:<18}{row['job']:<20}{row['ir_bytes']:>10}{row['before_ms']:>11}{row['after_ms']:>10}"
            f"{ratio:>14.2f}  {'yes' if row['identical'] else 'NO'}"
        )
    total_before = sum(row["before_ms"] for row in result.values())
    total_after = sum(row["after_ms"] for row in result.values())
    if result:
        print(f"{'total':<48}{total_before:>11.1f}{total_after:>10.1f}{total_after / total_before:>14.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(row["identical"] for row in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
