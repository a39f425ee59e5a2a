"""A tuned unit's intake and lookup outside its compile, as the service's workers and ingress run them: the
unit's bitcode read into text, the unit's key, and (when the store answers from its functions' entries) the
split of its functions' keys. Before (a git revision's compiler/ir.py and tuning/unit_keys.py): `parse_ir` in
the intake worker, `unit_hash` in the ingress (the whole unit's key, `whole_unit_answer`), then `unit_keys`
in the worker, which hashed the unit again. After (the working tree's): `read_unit` (the text and its key in
one intake job) and `unit_keys` given that key. The keys of both sides are compared (the tuning store's keys
must not change).

    python benchmarks/tuned_lookup.py --store STORE.sqlite3 --tree data/clients/builds/mxml/clang \
        --flags "-g -Os -D_GNU_SOURCE -Oz -D_THREAD_SAFE -D_REENTRANT -D_FORTIFY_SOURCE=2 -I." \
        [--before HEAD] [--runs 7] [--split]

Each source is compiled as optcc sends it (optserve/testing/tuned_units.py's `bitcode_of`); per unit,
--runs of each side in this process, alternating which goes first: the medians of their wall times. A unit
the store answers from its own key (a whole-unit entry) is not split, as in the service; --split splits
every unit of two functions or more (the path of a unit the store answers from its functions' entries only,
e.g. an edited one).
"""

from __future__ import annotations

import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from optserve.testing.tuned_units import OBJECTIVE, bitcode_of, revision_module, unit_arguments
from optserve.tuning.lookup import toolchain_of, whole_unit_answer
from optserve.tuning.store import open_store
from optserve.tuning.unit_keys import read_unit, unit_keys

MAX_BYTES = 64 * 2**20
MAX_FUNCTIONS = 150


def before(old, bitcode: bytes, store, split: bool):
    """`old`: the revision's (compiler.ir, tuning.unit_keys)."""
    ir_module, keys_module = old
    ir = ir_module.parse_ir(bitcode, MAX_BYTES)
    whole = keys_module.unit_hash(ir)  # the ingress's whole_unit_answer
    if whole_unit_answer(store, ir, toolchain_of(ir, OBJECTIVE), whole) is not None and not split:
        return whole, None
    return whole, keys_module.unit_keys(ir, MAX_FUNCTIONS)


def after(_, bitcode: bytes, store, split: bool):
    ir, whole = read_unit(bitcode, MAX_BYTES)
    if whole_unit_answer(store, ir, toolchain_of(ir, OBJECTIVE), whole) is not None and not split:
        return whole, None
    return whole, unit_keys(ir, MAX_FUNCTIONS, None, whole)


def main() -> int:
    parser = unit_arguments(__doc__.splitlines()[0], runs=7)
    parser.add_argument("--split", action="store_true", help="split every unit, as for function entries")
    args = parser.parse_args()
    old_ir = revision_module(args.before, "compiler/ir.py", "before_ir", {})
    old_keys = revision_module(
        args.before, "tuning/unit_keys.py", "before_unit_keys", {"optserve.compiler.ir": "before_ir"}
    )
    flags = shlex.split(args.flags)
    sides = {"before": before, "after": after}
    same_keys = True
    totals = {"before": 0.0, "after": 0.0}
    print(f"{'unit':<18}{'split':>6}{'before ms':>11}{'after ms':>10}{'after/before':>14}  same keys")
    with tempfile.TemporaryDirectory(prefix="tuned-lookup-") as scratch, open_store(args.store) as store:
        for source in sorted(args.tree.resolve().glob(args.glob)):
            bitcode = bitcode_of(args.compiler, args.tree, source, flags, Path(scratch) / "unit.bc")
            times: dict[str, list[float]] = {"before": [], "after": []}
            keys: dict[str, list] = {"before": [], "after": []}
            for run in range(args.runs):
                for name in ("before", "after") if run % 2 == 0 else ("after", "before"):
                    started = time.perf_counter()
                    whole, split = sides[name]((old_ir, old_keys), bitcode, store, args.split)
                    times[name].append(time.perf_counter() - started)
                    keys[name].append((whole, split.function_hashes if split else None))
            same = all(k == keys["before"][0] for k in keys["before"] + keys["after"])
            same_keys = same_keys and same
            ms = {name: 1000 * statistics.median(values) for name, values in times.items()}
            for name in totals:
                totals[name] += ms[name]
            split = "yes" if keys["after"][0][1] is not None else "no"
            print(
                f"{source.name:<18}{split:>6}{ms['before']:>11.1f}{ms['after']:>10.1f}"
                f"{ms['after'] / ms['before']:>14.2f}  {'yes' if same else 'NO'}"
            )
    if totals["before"]:
        ratio = totals["after"] / totals["before"]
        print(f"{'total':<24}{totals['before']:>11.1f}{totals['after']:>10.1f}{ratio:>14.2f}")
    return 0 if same_keys else 1


if __name__ == "__main__":
    sys.exit(main())
