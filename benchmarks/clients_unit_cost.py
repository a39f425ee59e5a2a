"""optcc's own cost on small real units that are not sent to the service: where the time goes, per unit.

    python benchmarks/clients_unit_cost.py --tree data/clients/builds/nettle/clang \
        --flags "-I. -DHAVE_CONFIG_H -ggdb3 -Wall -fPIC" --units sha256.c md5.c gcm.c \
        [--optcc .venv/bin/optcc --optcc /work/main/.venv/bin/optcc] [--runs 20]

For each unit (a source in a configured source tree, compiled in that tree with --flags at -Oz, its -MD -MP
dependency file as autotools writes it, objects into a scratch folder), median wall milliseconds of --runs
runs, one compile at a time, every side in turn:
  clang          clang-19 -Oz -c: what the build would cost without optcc
  front end      the IR step alone (`-Oz -Xclang -disable-llvm-passes -emit-llvm`)
  back end       clang -Oz -c on that bitcode (`-x ir`): the IR step and this are optcc's two-process compile
  optcc cold     each --optcc, its object cache empty (the service's model known), the service unreachable
                 (no unit is sent: a build of small units on an idle machine sends almost none)
  optcc off      the same with OPTCC_CACHE=0 (no hashing, no store)
  optcc hit      a hit in its object cache (the warm rebuild)
and, once per --optcc install, median milliseconds of its interpreter's start (`python -c pass`, `python -S
-c pass`: the difference is site and the install's .pth files) and of importing optcc's compile path, and
optcc's own log phases of the cold runs (`before_s`: imports and cache lookup; `clang_s`: until clang's
object; `seconds`: the in-process take-over).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from optserve.clients import object_cache
from optserve.testing.commands import timed

SERVER = "127.0.0.1:1"  # nothing listens: no unit is sent, and no cache lookup asks for the model


def empty_cache(root: Path) -> None:
    """An empty object cache that knows the service's model (as in a build after its first unit)."""
    shutil.rmtree(root, ignore_errors=True)
    object_cache.note_model(root, SERVER, "passformer@bench")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, required=True, help="a configured source tree (its config.h)")
    parser.add_argument("--flags", default="", help="the package's compile flags, without -O, -c, -o")
    parser.add_argument("--units", nargs="+", required=True, help="sources, relative to --tree")
    parser.add_argument("--optcc", action="append", type=Path, help="optcc programs (default: this venv's)")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    installs = [path.absolute() for path in args.optcc or [Path(sys.executable).with_name("optcc")]]
    tree = args.tree.resolve()
    flags = shlex.split(args.flags)
    rows: dict[str, dict[str, list[float]]] = {}
    phases: dict[str, dict[str, list[float]]] = {str(o): {} for o in installs}
    with tempfile.TemporaryDirectory(prefix="unit-cost-") as scratch_name:
        scratch = Path(scratch_name)
        (scratch / "tmp").mkdir()
        base = os.environ | {"TMPDIR": str(scratch / "tmp"), "OPTCC_SERVER": SERVER, "OPTCC_RETRY": "3600"}
        for unit in args.units:
            out = str(scratch / "unit.o")
            deps = ["-MT", out, "-MD", "-MP", "-MF", out + ".d"]
            command = [*flags, "-Oz", *deps, "-c", unit, "-o", out]
            bitcode = str(scratch / "unit.bc")
            sides: dict[str, tuple[list[str], dict[str, str], object]] = {
                "clang": (["clang-19", *command], base, None),
                "front end": (
                    [
                        "clang-19",
                        *flags,
                        "-Oz",
                        "-Xclang",
                        "-disable-llvm-passes",
                        "-emit-llvm",
                        *deps,
                        "-c",
                        unit,
                        "-o",
                        bitcode,
                    ],
                    base,
                    None,
                ),  # fmt: skip
                "back end": (
                    [
                        "clang-19",
                        *flags,
                        "-Oz",
                        "-Wno-unused-command-line-argument",
                        "-c",
                        "-x",
                        "ir",
                        bitcode,
                        "-o",
                        str(scratch / "back.o"),
                    ],
                    base,
                    None,
                ),  # fmt: skip
            }
            for number, optcc in enumerate(installs):
                cache = scratch / f"cache-{number}"
                log = scratch / f"log-{number}.jsonl"
                env = base | {"OPTCC_CACHE_DIR": str(cache), "OPTCC_LOG": str(log)}
                sides[f"optcc {number} cold"] = ([str(optcc), *command], env, lambda c=cache: empty_cache(c))
                sides[f"optcc {number} off"] = ([str(optcc), *command], env | {"OPTCC_CACHE": "0"}, None)
                hit_cache = scratch / f"hit-{number}"
                empty_cache(hit_cache)
                hit_env = base | {"OPTCC_CACHE_DIR": str(hit_cache)}
                timed([str(optcc), *command], tree, hit_env)  # fills the cache
                sides[f"optcc {number} hit"] = ([str(optcc), *command], hit_env, None)
            times: dict[str, list[float]] = {side: [] for side in sides}
            for _ in range(args.runs):  # every side in turn: the load moves them alike
                for side, (argv, env, before) in sides.items():
                    if side == "back end" and not Path(bitcode).exists():
                        timed(sides["front end"][0], tree, env)
                    times[side].append(timed(argv, tree, env, before))
            rows[unit] = times
            for number, optcc in enumerate(installs):
                log = scratch / f"log-{number}.jsonl"
                for line in log.read_text().splitlines():
                    record = json.loads(line)
                    if record.get("from_cache"):
                        continue
                    for field in ("before_s", "clang_s", "seconds"):
                        if field in record:
                            phases[str(optcc)].setdefault(field, []).append(record[field] * 1000)
                log.unlink()
        starts = {}
        for optcc in installs:
            python = str(optcc.with_name("python"))
            env = base
            starts[str(optcc)] = {
                name: statistics.median(timed([python, *argv], scratch, env) for _ in range(args.runs))
                for name, argv in (
                    ("python -c pass", ["-c", "pass"]),
                    ("python -S -c pass", ["-S", "-c", "pass"]),
                    ("python -c 'import optserve.clients.optcc, ...object_cache, ...takeover'",
                     ["-c", "import optserve.clients.optcc, optserve.clients.object_cache, "
                      "optserve.clients.takeover"]),
                )
            }  # fmt: skip
    print(f"{args.runs} runs a side, median wall ms; tree {tree}; flags {args.flags!r}")
    for number, optcc in enumerate(installs):
        print(f"optcc {number}: {optcc}")
    sides = list(next(iter(rows.values())))
    print("\n| unit | " + " | ".join(sides) + " |")
    print("|---|" + "---:|" * len(sides))
    for unit, times in rows.items():
        print(f"| {unit} | " + " | ".join(f"{statistics.median(times[s]):.0f}" for s in sides) + " |")
    medians = {s: statistics.median(statistics.median(t[s]) for t in rows.values()) for s in sides}
    print("| **median unit** | " + " | ".join(f"**{medians[s]:.0f}**" for s in sides) + " |")
    for number, optcc in enumerate(installs):
        cold = medians[f"optcc {number} cold"] - medians["clang"]
        off = medians[f"optcc {number} off"] - medians["clang"]
        print(f"\noptcc {number} adds to clang, median unit: {cold:.0f} ms cold, {off:.0f} ms cache off")
        for name, value in starts[str(optcc)].items():
            print(f"  {name}: {value:.0f} ms")
        logged = phases[str(optcc)]
        print("  its log, cold and off runs (median ms): " + ", ".join(
            f"{field} {statistics.median(values):.0f}" for field, values in logged.items()
        ))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
