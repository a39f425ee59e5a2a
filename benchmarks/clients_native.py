"""What a unit's command costs through optcc's native thin client, through the Python client and as clang
alone, on one real unit (docs/clients.md, "The native thin client").

    python benchmarks/clients_native.py --bin /tmp/venv/bin [--runs 20] \
        [--tree data/clients/builds/mxml/clang --unit mxml-get.c]

--bin: the bin folder of an optserve install (`pip install optserve[client]` from a wheel): its `optcc` sh
script, and `optcc-py` (the Python client) beside it. The script's native client is built first
(`optcc --build-tap`, which builds it with the bitcode tap, both into a scratch OPTCC_TAP_DIR).

Every round runs each variant once, in turn (so each sees the same load), after three warm-up rounds (the
resident server started, the taps in place); the table gives median, 25th and 75th percentile wall
milliseconds over the rounds:
  clang                  clang-19 with the unit's flags (mxml's own: -g -Os ... -Oz)
  optcc (native)         the installed optcc: sh script, native client, the resident server's child
  optcc-py (Python)      the Python client the script runs otherwise: Python, resident_link, the server
  optcc, resident off    the Python client, optcc in its own process (OPTCC_RESIDENT=0)
  python -c pass         the install's interpreter starting and stopping
  -E through optcc       a command that compiles nothing (the native client execs clang), and clang -E itself
The service is unreachable (OPTCC_SERVER=127.0.0.1:1) and the object cache off (OPTCC_CACHE=0): a unit's
own cost, the service's call aside (it runs beside clang's back end).

--build-rounds N adds whole builds: the tree's own Makefile, `make -s -j2 CC=... TARGETS` (--targets,
default mxml's libmxml.a and testmxml.o: its 11 units) in a fresh copy of the tree after `make clean`, with
clang-19, the installed optcc and optcc-py in turn, N rounds after one warm-up; medians of wall seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from optserve.testing.commands import timed

REPO_ROOT = Path(__file__).resolve().parents[1]
FLAGS = "-g -Os -D_GNU_SOURCE -Oz -D_THREAD_SAFE -D_REENTRANT -D_FORTIFY_SOURCE=2 -Wall -Wunused"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, required=True, help="an install's bin folder (optcc, optcc-py)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tree", type=Path, default=REPO_ROOT / "data/clients/builds/mxml/clang")
    parser.add_argument("--unit", default="mxml-get.c")
    parser.add_argument("--flags", default=FLAGS)
    parser.add_argument("--build-rounds", type=int, default=0)
    parser.add_argument("--targets", nargs="*", default=["libmxml.a", "testmxml.o"])
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="optcc-native-bench-"))
    resident = scratch / "run"
    resident.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "OPTCC_RESIDENT")}
    env |= {
        "OPTCC_SERVER": "127.0.0.1:1",
        "OPTCC_CACHE": "0",
        "OPTCC_TAP_DIR": str(scratch / "tap"),
        "OPTCC_RESIDENT_DIR": str(resident),
    }
    built = subprocess.run([args.bin / "optcc", "--build-tap"], env=env, capture_output=True, text=True)
    print(built.stdout.strip(), built.stderr.strip(), sep="\n")
    unit = [*args.flags.split(), "-c", args.unit, "-o"]
    objects = scratch / "objects"
    objects.mkdir()
    python = (args.bin / "optcc-py").read_text().splitlines()[0].removeprefix("#!").strip()
    variants = {
        "clang": (["clang-19", *unit, str(objects / "clang.o")], {}),
        "optcc (native)": ([str(args.bin / "optcc"), *unit, str(objects / "native.o")], {}),
        "optcc-py (Python)": ([str(args.bin / "optcc-py"), *unit, str(objects / "python.o")], {}),
        "optcc, resident off": (
            [str(args.bin / "optcc"), *unit, str(objects / "off.o")],
            {"OPTCC_RESIDENT": "0"},
        ),
        "python -c pass": ([python, "-c", "pass"], {}),
        "-E through optcc": ([str(args.bin / "optcc"), "-E", args.unit, "-o", "/dev/null"], {}),
        "clang -E": (["clang-19", "-E", args.unit, "-o", "/dev/null"], {}),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.runs + 3):
        for name, (command, extra) in variants.items():
            elapsed = timed(command, args.tree, env | extra)
            if round_ >= 3:
                times[name].append(elapsed)
    load = os.getloadavg()
    print(f"{args.runs} rounds, {args.unit}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'command':24s} {'median':>8s} {'p25':>8s} {'p75':>8s}  (ms)")
    for name, values in times.items():
        values.sort()
        quartile = len(values) // 4
        median = statistics.median(values)
        print(f"{name:24s} {median:8.1f} {values[quartile]:8.1f} {values[-1 - quartile]:8.1f}")
    if args.build_rounds:
        builds(args, env, scratch)
    subprocess.run([args.bin / "optcc", "--stop-server"], env=env, capture_output=True)
    return 0


def builds(args, env: dict[str, str], scratch: Path) -> None:
    """Whole builds of the tree with each compiler in turn (--build-rounds)."""
    import shutil

    sides = {
        "clang": "clang-19",
        "optcc (native)": args.bin / "optcc",
        "optcc-py (Python)": args.bin / "optcc-py",
    }
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    for round_ in range(args.build_rounds + 1):
        for side, compiler in sides.items():
            tree = scratch / f"build-{round_}-{side.split()[0]}"
            shutil.copytree(args.tree, tree)
            subprocess.run(["make", "-s", "clean"], cwd=tree, capture_output=True)
            elapsed = timed(["make", "-s", "-j2", f"CC={compiler}", *args.targets], tree, env) / 1000
            if round_:
                seconds[side].append(elapsed)
            shutil.rmtree(tree)
    load = os.getloadavg()
    print(f"{args.build_rounds} builds each, make -j2 {' '.join(args.targets)}, load average {load[0]:.2f}")
    clang = statistics.median(seconds["clang"])
    for side, values in seconds.items():
        median = statistics.median(values)
        each = " ".join(f"{value:.2f}" for value in values)
        print(f"{side:24s} {median:6.2f} s ({median / clang:.2f}x clang)  {each}")


if __name__ == "__main__":
    sys.exit(main())
