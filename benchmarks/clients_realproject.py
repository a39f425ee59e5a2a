"""optcc on real projects: Debian source packages built by their own build systems, tested, timed.

    python benchmarks/clients_realproject.py --server 127.0.0.1:29300 \
        [--packages xz-utils mxml ...] [--out docs/bench/clients_realproject.md] [--json FILE] \
        [--before-after | --compare-budget B [--compare-first]]

Needs a running optserve (`optserve serve --config ...`). For every package, two builds of the same fresh
source tree, one after the other, with the package's own build system (autotools, cmake, meson or plain make):
  clang    CC=clang-19 CXX=clang++-19 CFLAGS=-Oz CXXFLAGS=-Oz
  optcc    CC=optcc    CXX=optcc++    CFLAGS=-Oz CXXFLAGS=-Oz   (greedy unless --strategy; object cache on)
and in each: configure, build (cold: optcc's object cache starts empty for the run), the package's own test
suite, clean, build again from the unchanged sources (warm). Measured: wall time of every step; `.text` bytes
of every object file (`.o`) in both trees, compared object by object (optcc's may never be larger); optcc's
log (OPTCC_LOG) per step: units taken over (answered by the service now, or from optcc's cache), passed
through (not a size build: links, probes, ...) and fallen back (service failed: clang's object); and whether
the warm build's objects are byte for byte the cold build's. Sources come from the Debian archive apt
already uses, through a private list (corpus/real_packages.py; nothing under /etc/apt changes).

--before-after adds a third copy of each package, built right after the optcc one in the same run (right
before it with `--before-after first`):
  optcc-oz CC=optcc ... OPTCC_CLANG_BASELINE=0  (the service is not told clang's .text size and compiles its
                                                 own -Oz; that is optcc's default too: give optcc's side
                                                 OPTCC_CLANG_BASELINE=1 in the environment to compare)
and a table of both optcc sides' cold builds unit by unit (optcc's time per unit over clang's compile of it).
--compare-optcc DIR does the same with a third copy built with another install's optcc and optcc++
(DIR/optcc, e.g. the main checkout's .venv/bin: `optcc-main`, its own defaults), after this one's (before
it with --compare-first).
--compare-budget B does the same with a third copy built with OPTCC_BUDGET=B (`optcc-budget`), after the
optcc one (before it with --compare-first): two budgets at the same load, on one service.

Packages: five of the seven in the real-code corpus's held-out test split (never seen in training),
plus two C++ libraries; zlib, lua, libjpeg and MiBench are never used. Of the test split, libuv1 is left out
because its test suite refuses to run as root (the benchmark machine's user), and sed because its build is
the longest (gnulib: 93 s of configure with clang alone) and its panic test fails as root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from optserve.clients import elf
from optserve.config import REPO_ROOT
from optserve.corpus.real_packages import CaptureLayout, check_allowed, fetch_source, prepare_apt

WORK = REPO_ROOT / "data" / "clients"
BIN = Path(sys.executable).parent
SIZE_FLAGS = "-Oz"
# Build products that are not the package's: configure/cmake/meson probes.
PROBE_DIRS = ("CMakeFiles/CMakeScratch", "CMakeFiles/CMakeTmp", "meson-private")


@dataclass(frozen=True)
class Recipe:
    """How one package is built and tested with its own build system (bash lines, run in the tree)."""

    package: str  # Debian source package
    build_system: str
    language: str
    held_out: bool  # in the real-code corpus's test split (never trained on)
    configure: str
    build: str
    test: str
    clean: str


RECIPES = (
    Recipe(
        "xz-utils", "autotools", "C", True,
        "./configure --disable-shared --disable-nls --disable-doc",
        "make -j2", "make -j2 check", "make clean",
    ),
    Recipe(
        "mxml", "autoconf + hand-written Makefile", "C", True,
        "./configure --disable-shared",
        "make -j2 libmxml.a testmxml", "make test", "make clean",
    ),
    # pcre2_grep_test fails with clang-19 -Oz alone here (callout output order in grepoutputC): left out.
    Recipe(
        "pcre2", "cmake", "C", True,
        "cmake -S . -B _build -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=",
        "cmake --build _build -j2", "ctest --test-dir _build --output-on-failure -E pcre2_grep_test",
        "cmake --build _build --target clean",
    ),
    Recipe(
        "nettle", "autoconf + hand-written Makefiles", "C", True,
        "./configure --disable-shared --disable-documentation --disable-openssl --disable-public-key",
        "make -j2", "make -j2 check", "make clean",
    ),
    # Makefile.unix appends `-O2 -g $(WARNINGS)` after CFLAGS: the size level rides in WARNINGS.
    Recipe(
        "opus", "plain make (Makefile.unix)", "C", True,
        "true",
        'make -f Makefile.unix -j2 CC="$CC" WARNINGS="-Wall $CFLAGS"',
        'make -f Makefile.unix check CC="$CC" WARNINGS="-Wall $CFLAGS"', "make -f Makefile.unix clean",
    ),
    Recipe(
        "libjsoncpp", "meson", "C++", False,
        "meson setup _build --buildtype=plain -Ddefault_library=static -Dtests=true",
        "ninja -C _build -j2", "meson test -C _build --num-processes 2", "ninja -C _build clean",
    ),
    # COMPILE_SIZE=1 puts -Os before $CFLAGS (-Oz, the last level wins) instead of -O3 -funroll-loops.
    Recipe(
        "libtommath", "plain make (makefile)", "C", True,
        "true",
        "make -j2 COMPILE_SIZE=1", "make -j2 COMPILE_SIZE=1 test && ./test", "make clean",
    ),
    # Its Makefile sets CXXFLAGS = -fPIC itself: given on make's command line, with the size level.
    Recipe(
        "tinyxml2", "plain make", "C++", False,
        "true",
        'make -j2 CXX="$CXX" CXXFLAGS="-fPIC $CXXFLAGS"', 'make test CXX="$CXX" CXXFLAGS="-fPIC $CXXFLAGS"',
        "make clean",
    ),
)  # fmt: skip
STEPS = ("configure", "build", "test", "clean", "warm")
# The optional third side of a run, and its key in each package's results.
THIRD_SIDES = {"optcc-oz": "compare_oz", "optcc-budget": "compare_budget", "optcc-main": "compare_main"}
THIRD_SUFFIXES = tuple((side, key.removeprefix("compare")) for side, key in THIRD_SIDES.items())
# optcc's per-unit timings (its OPTCC_LOG) summed in the cold build's breakdown, with their column names.
BREAKDOWN = {
    "before_s": "optcc's imports",
    "clang_s": "clang",
    "ir_step_s": "IR step",
    "deadline_s": "deadline given",
    "service_s": "service call",
    "service_total_s": "in the service",
    "service_sample_s": "model",
    "service_compile_s": "compiling",
    "seconds": "unit",
}


def compilers(
    server: str,
    strategy: str,
    deadline: float,
    budget: float | None,
    cache_dir: Path,
    before_after="",
    compare_budget: float | None = None,
    compare_optcc: Path | None = None,
    optcc_bin: Path = BIN,
) -> dict[str, dict[str, str]]:
    """The environment of each side's builds, in build order: clang, optcc; with `before_after` "last" (or
    "first") a third side after (or before) optcc: optcc-oz, or with `compare_budget` optcc-budget (optcc
    with that OPTCC_BUDGET). The side built second finds the model's prompts of the same units in vLLM's
    prefix cache: a run in each order balances that."""
    flags = {"CFLAGS": SIZE_FLAGS, "CXXFLAGS": SIZE_FLAGS}
    optcc = {
        "CC": str(optcc_bin / "optcc"),
        "CXX": str(optcc_bin / "optcc++"),
        "OPTCC_SERVER": server,
        "OPTCC_STRATEGY": strategy,
        "OPTCC_DEADLINE": str(deadline),
        "OPTCC_CACHE_DIR": str(cache_dir),
    } | ({"OPTCC_BUDGET": str(budget)} if budget is not None else {})
    sides = {"clang": {"CC": "clang-19", "CXX": "clang++-19", **flags}, "optcc": {**optcc, **flags}}
    if before_after:  # a cache of its own: cold means cold for this side too
        third = "optcc-oz" if compare_budget is None else "optcc-budget"
        if compare_optcc is not None:
            third = "optcc-main"
            before = {"CC": str(compare_optcc / "optcc"), "CXX": str(compare_optcc / "optcc++")}
            before["OPTCC_CACHE_DIR"] = f"{cache_dir}-main"
        elif compare_budget is None:
            before = {"OPTCC_CLANG_BASELINE": "0", "OPTCC_CACHE_DIR": f"{cache_dir}-oz"}
        else:
            before = {"OPTCC_BUDGET": str(compare_budget), "OPTCC_CACHE_DIR": f"{cache_dir}-budget"}
        sides[third] = {**optcc, **flags, **before}
        if before_after == "first":
            sides = {name: sides[name] for name in ("clang", third, "optcc")}
    return sides


def run_side(
    recipe: Recipe, source: Path, side: str, env: dict[str, str], logs: Path, tree_name: str = ""
) -> dict:
    """Configure, build, test, clean and rebuild one fresh copy of `source` (in the folder of side
    `tree_name`, else its own); what each step took and gave."""
    tree = WORK / "builds" / recipe.package / (tree_name or side)
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(source, tree, symlinks=True)
    (tree / ".tmp").mkdir()
    result: dict = {"side": side, "steps": {}}
    objects: dict[str, tuple[str, int]] = {}
    for step in STEPS:
        log = logs / f"{recipe.package}-{side}-{step}.jsonl"
        log.unlink(missing_ok=True)
        environment = os.environ | {"TMPDIR": str(tree / ".tmp"), "OPTCC_LOG": str(log)} | env
        command = {"warm": recipe.build}.get(step) or getattr(recipe, step)
        started = time.monotonic()
        done = subprocess.run(  # a session of its own: one optcc "build" per step (clients/build_state.py)
            ["bash", "-c", command], cwd=tree, env=environment, capture_output=True, text=True,
            start_new_session=True,
        )  # fmt: skip
        seconds = time.monotonic() - started
        units = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        result["steps"][step] = {"rc": done.returncode, "seconds": round(seconds, 2), **count_units(units)}
        (logs / f"{recipe.package}-{side}-{step}.out").write_text(done.stdout[-20000:] + done.stderr[-20000:])
        if done.returncode != 0:
            print(f"{recipe.package} {side} {step} failed ({done.returncode}):\n{done.stderr[-2000:]}")
            if step != "test":
                break
        if step == "test":
            objects = object_table(tree)
        if step == "warm":
            rebuilt = object_table(tree)
            result["warm_objects"] = len(rebuilt)
            result["warm_changed"] = sorted(
                p for p, (digest, _) in rebuilt.items() if objects[p][0] != digest
            )
    result["objects"] = objects
    return result


def count_units(units: list[dict]) -> dict[str, int]:
    """Units of one step by what optcc did with them (its OPTCC_LOG lines)."""
    kinds = Counter(u["outcome"] for u in units)
    served = [u for u in units if u["outcome"] == "service"]
    return {
        "taken_over": kinds["service"] + kinds["fallback"] + kinds["not_asked"],
        "not_asked": kinds["not_asked"],  # kept clang's object: its budget could not pay for a call
        "from_cache": sum(1 for u in units if u.get("from_cache")),  # budget cuts (fallbacks) too
        "service_won": sum(1 for u in served if u["winner"] == "service"),
        "passed_through": kinds["passthrough"],
        "fell_back": kinds["fallback"],
    }


def object_table(tree: Path) -> dict[str, tuple[str, int]]:
    """Every object file of the package in `tree`: relative path -> (sha256, .text bytes)."""
    table = {}
    for path in sorted(tree.rglob("*.o")):
        relative = path.relative_to(tree).as_posix()
        if path.is_file() and not any(probe in relative for probe in PROBE_DIRS):
            data = path.read_bytes()
            table[relative] = (hashlib.sha256(data).hexdigest(), elf.text_size(data))
    return table


def compare(clang: dict, optcc: dict) -> dict:
    """`.text` of the objects both builds made, and those where optcc's is larger than clang's."""
    common = sorted(set(clang["objects"]) & set(optcc["objects"]))
    larger = [p for p in common if optcc["objects"][p][1] > clang["objects"][p][1]]
    return {
        "objects": len(common),
        "only_one_side": len(set(clang["objects"]) ^ set(optcc["objects"])),
        "clang_text": sum(clang["objects"][p][1] for p in common),
        "optcc_text": sum(optcc["objects"][p][1] for p in common),
        "smaller": sum(1 for p in common if optcc["objects"][p][1] < clang["objects"][p][1]),
        "larger": larger,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", help="host:port of a running optserve's gRPC API")
    parser.add_argument("--packages", nargs="*", default=[r.package for r in RECIPES])
    parser.add_argument("--strategy", default="greedy")
    parser.add_argument(
        "--deadline", type=float, default=30.0,
        help="OPTCC_DEADLINE (optcc's default 10 s is short for the largest units on 2 loaded cores)",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=float,
        help="OPTCC_BUDGET: the service's time per unit as a multiple of clang's compile (0: off, every unit "
        "gets --deadline; default: optcc's own default)",
    )  # fmt: skip
    parser.add_argument(
        "--before-after", nargs="?", const="last", choices=("last", "first"),
        help="also build with OPTCC_CLANG_BASELINE=0 (the service compiles its own -Oz) and compare per "
        "unit; built after optcc's side (last, the default) or before it (first)",
    )  # fmt: skip
    parser.add_argument(
        "--compare-budget", type=float,
        help="a third copy built with this OPTCC_BUDGET, after the optcc one (--compare-first: before it)",
    )  # fmt: skip
    parser.add_argument("--compare-first", action="store_true")
    parser.add_argument(
        "--tune", type=int, metavar="BUDGET",
        help="the tuning store's workflow: after optcc's side, `optserve tune --budget BUDGET` (the "
        "service's store: --tune-store, else the default), then a copy built again with an empty object "
        "cache (`optcc-tuned`; its warm step: the cache warm); with --strategy stored (optcc's default)",
    )  # fmt: skip
    parser.add_argument(
        "--no-baseline-records", action="store_true",
        help="--tune: build 2 without the records of clang's objects build 1 kept (clang's back end runs "
        "for every unit, as on a machine that never built the package)",
    )  # fmt: skip
    parser.add_argument(
        "--optcc-bin", type=Path, default=BIN,
        help="the folder of the optcc and optcc++ to build with (default: this venv's, an editable install "
        "whose every Python start loads setuptools' finder; an installed wheel's is what users run: "
        "docs/bench/tuning_builds.md says how to make one)",
    )  # fmt: skip
    parser.add_argument(
        "--build-rounds", type=int, default=3, metavar="N",
        help="--tune: clang's build and build 2 (the object cache empty, build 1's records as they were) "
        "N times in all, interleaved after the run's own, each after the build system's clean; the tables "
        "give the medians (clang's build: its only side without state, also build 1's denominator)",
    )  # fmt: skip
    parser.add_argument("--tune-store", default="", help="--tune: the service's tuning store URL")
    parser.add_argument("--tune-workers", type=int, default=2, help="--tune: Ray CPUs for the search")
    parser.add_argument(
        "--compare-optcc", type=Path,
        help="a third copy built with DIR/optcc and DIR/optcc++ (another install: main's), after this one's",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the markdown section here")
    parser.add_argument("--json", type=Path, default=WORK / "realproject.json")
    parser.add_argument("--render", type=Path, help="only print the tables of an earlier run's --json file")
    parser.add_argument(
        "--logs", type=Path, default=WORK / "logs", help="--render: that run's OPTCC_LOG files"
    )
    args = parser.parse_args()
    if args.render:
        run = json.loads(args.render.read_text())
        before_after = any(third in p for p in run["packages"] for third in THIRD_SIDES)
        print(
            render(run)
            + render_units(unit_statistics(args.logs, run))
            + (render_before_after(run, args.logs) if before_after else "")
        )
        return 0
    if args.compare_budget is not None or args.compare_optcc is not None:
        args.before_after = "first" if args.compare_first else "last"

    if not args.server:
        parser.error("--server is required (or --render)")
    from optserve.clients.python.client import OptserveClient

    with OptserveClient(args.server) as client:
        model = client.model_metadata()
    recipes = [r for r in RECIPES if r.package in args.packages]
    layout = CaptureLayout(WORK)
    if not (layout.apt / "lists").exists():
        prepare_apt(layout)
    cache_dir = WORK / "optcc-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)  # cold means cold
    shutil.rmtree(f"{cache_dir}-oz", ignore_errors=True)
    shutil.rmtree(f"{cache_dir}-budget", ignore_errors=True)
    shutil.rmtree(f"{cache_dir}-main", ignore_errors=True)
    shutil.rmtree(f"{cache_dir}-tuned", ignore_errors=True)  # --compare-optcc's side: cold too
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # the bitcode tap, built once per compiler (as after any earlier optcc build on this machine): units
    # take one clang process; without it (no LLVM headers) they take two, and the run says so
    tap = subprocess.run([args.optcc_bin / "optcc", "--build-tap"], capture_output=True, text=True)
    print(f"bitcode tap: {(tap.stdout or tap.stderr).strip()}", flush=True)
    sides = compilers(
        args.server,
        args.strategy,
        args.deadline,
        args.budget,
        cache_dir,
        args.before_after,
        args.compare_budget,
        args.compare_optcc,
        args.optcc_bin,
    )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()
    results = []
    for recipe in recipes:
        check_allowed(recipe.package)
        source = fetch_source(layout, recipe.package)
        version = sorted((layout.sources / recipe.package).glob("*.dsc"))[-1].stem.split("_", 1)[1]
        built = {side: run_side(recipe, source, side, env, logs) for side, env in sides.items()}
        outcome = {"package": recipe.package, "version": version, "recipe": recipe.__dict__}
        outcome |= {side: {k: v for k, v in b.items() if k != "objects"} for side, b in built.items()}
        if args.tune:  # the store's workflow: tune what the first build recorded, then build again
            outcome["tune"] = run_tune(args.tune, args.tune_store, args.tune_workers, logs, recipe.package)
            # the object cache empty; the records of clang's objects that build 1 kept (baseline_memo.py)
            # stay, as after `optserve tune` on a developer's machine, unless --no-baseline-records
            records = "0" if args.no_baseline_records else f"{cache_dir}/baselines"
            tuned_env = sides["optcc"] | {
                "OPTCC_CACHE_DIR": f"{cache_dir}-tuned",
                "OPTCC_BASELINE_DIR": records,
            }
            kept = snapshot_records(records)
            # a fresh copy where build 1 ran (the same checkout rebuilt: the same paths in its debug info)
            built["optcc-tuned"] = run_side(recipe, source, "optcc-tuned", tuned_env, logs, tree_name="optcc")
            outcome["optcc-tuned"] = {k: v for k, v in built["optcc-tuned"].items() if k != "objects"}
            outcome["build_rounds"] = build_rounds(
                recipe, args.build_rounds, sides["clang"], tuned_env, kept, logs,
                first={"clang": built["clang"], "optcc-tuned": built["optcc-tuned"]},
            )  # fmt: skip
            outcome["compare_tuned"] = compare(built["clang"], built["optcc-tuned"])
        outcome["compare"] = compare(built["clang"], built["optcc"])
        for third, key in THIRD_SIDES.items():
            if third in built:
                outcome[key] = compare(built["clang"], built[third])
        results.append(outcome)
        print(json.dumps(outcome["compare"] | {"package": recipe.package}), flush=True)
    run = {
        "date": started,
        "load_average": [load_before, os.getloadavg()],
        "cpus": os.cpu_count(),
        "command": " ".join(["python benchmarks/clients_realproject.py", *sys.argv[1:]]),
        "model": {"name": model.name, "version": model.version, "backend": model.backend},
        "strategy": args.strategy,
        "deadline": args.deadline,
        "budget": args.budget,
        "compare_budget": args.compare_budget,
        "compare_optcc": None if args.compare_optcc is None else str(args.compare_optcc),
        "tune_budget": args.tune,
        "baseline_records": not args.no_baseline_records,
        "bitcode_tap": tap.returncode == 0,
        "optcc_bin": str(args.optcc_bin),
        "packages": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(run, indent=1) + "\n")
    section = render(run) + render_units(unit_statistics(logs, run))
    if args.before_after:
        section += render_before_after(run, logs)
    if args.tune:
        section += render_tuned(run)
    print(section)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(section)
    ok = all(
        p[side]["steps"].get("test", {}).get("rc") == 0 and not p[f"compare{suffix}"]["larger"]
        for p in results
        for side, suffix in (("clang", ""), ("optcc", ""), ("optcc-tuned", "_tuned"), *THIRD_SUFFIXES)
        if side in p
    )
    return 0 if ok else 1


def snapshot_records(records: str) -> Path | None:
    """A copy of build 1's records of clang's objects (and its output marks) as build 2 first finds them,
    for `build_rounds` to put back: build 2 changes them (a unit tuned to nothing loses its mark)."""
    if records == "0" or not Path(records).is_dir():
        return None
    kept = Path(f"{records}-as-after-build-1")
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(records, kept)
    return kept


def build_rounds(
    recipe: Recipe, rounds: int, clang_env: dict, tuned_env: dict, kept: Path | None, logs: Path, first: dict
) -> dict[str, list[float]]:
    """Clang's build and build 2 again, interleaved, `rounds` times in all with the run's own: each after the
    build system's clean in the side's tree; build 2 with an empty object cache of its own and build 1's
    records put back (`snapshot_records`), so every round is a first build after `optserve tune`. Seconds
    per side, the run's own first. One build takes under a second for some packages, and one round can
    differ from the next by a quarter of that on a shared machine: the tables give the medians."""
    seconds = {side: [built["steps"].get("build", {}).get("seconds", 0.0)] for side, built in first.items()}
    trees = {"clang": "clang", "optcc-tuned": "optcc"}
    for round_number in range(2, rounds + 1):
        for side, env in (("clang", clang_env), ("optcc-tuned", tuned_env)):
            tree = WORK / "builds" / recipe.package / trees[side]
            if side == "optcc-tuned":
                env = env | {"OPTCC_CACHE_DIR": f"{env['OPTCC_CACHE_DIR']}-round{round_number}"}
                shutil.rmtree(env["OPTCC_CACHE_DIR"], ignore_errors=True)
                if kept is not None:
                    shutil.rmtree(env["OPTCC_BASELINE_DIR"], ignore_errors=True)
                    shutil.copytree(kept, env["OPTCC_BASELINE_DIR"])
            log = logs / f"{recipe.package}-{side}-build-round{round_number}.jsonl"
            log.unlink(missing_ok=True)
            environment = os.environ | {"TMPDIR": str(tree / ".tmp"), "OPTCC_LOG": str(log)} | env
            subprocess.run(["bash", "-c", recipe.clean], cwd=tree, env=environment, capture_output=True)
            started = time.monotonic()
            done = subprocess.run(
                ["bash", "-c", recipe.build], cwd=tree, env=environment, capture_output=True, text=True,
                start_new_session=True,
            )  # fmt: skip
            if done.returncode != 0:
                print(f"{recipe.package} {side} build round {round_number} failed:\n{done.stderr[-2000:]}")
                continue
            seconds[side].append(round(time.monotonic() - started, 2))
    return seconds


def _build_seconds(package: dict, side: str) -> float:
    """A side's build step: the median of its rounds (`build_rounds`), else the run's one build."""
    rounds = package.get("build_rounds", {}).get(side)
    if rounds:
        return statistics.median(rounds)
    return package[side]["steps"].get("build", {}).get("seconds", 0)


def run_tune(budget: int, store: str, workers: int, logs: Path, package: str) -> dict:
    """`optserve tune` over what the service recorded so far (this package's first build): its summary."""
    command = [str(BIN / "optserve"), "tune", "--budget", str(budget), "--workers", str(workers), "--json"]
    command += ["--store", store] if store else []
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    (logs / f"{package}-tune.out").write_text(done.stdout[-20000:] + done.stderr[-20000:])
    if done.returncode != 0:
        print(f"{package}: optserve tune failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return {"rc": done.returncode, "seconds": round(time.monotonic() - started, 1)}
    summary = json.loads(done.stdout)
    return {"rc": 0, "seconds": round(time.monotonic() - started, 1), "summary": summary}


def render_tuned(run: dict) -> str:
    """The tuning store's workflow per package: the first build (store empty), `optserve tune`, the build
    again with an empty object cache, then warm; `.text` and time against clang-19 -Oz."""
    lines = [
        "",
        f"Tuning store (`--tune {run['tune_budget']}`): build 1 with optcc's defaults and an empty store, "
        "`optserve tune`, build 2 (a fresh copy in build 1's folder) with an empty object cache "
        + (
            "and the records of clang's objects build 1 kept (baseline_memo.py)"
            if run.get("baseline_records")
            else "and no records of clang's objects"
        )
        + ", build 2 again warm (after clean). Time ratios are against clang-19 -Oz's build of the same "
        "step."
        + (
            " Clang's build and build 2: the median of interleaved rounds, each after the "
            "build system's clean, build 2's with an empty object cache and build 1's records as they were "
            f"(`--build-rounds`; seconds per round: {rounds})."
            if (rounds := {p["package"]: p["build_rounds"] for p in run["packages"] if "build_rounds" in p})
            else ""
        ),
        "",
        "| package | build 1: time | build 1: saved | tune: s (compiles) | build 2: time | build 2: saved | "
        "build 2 warm: time | larger (1 / 2) | tests clang / 1 / 2 |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    totals = Counter()
    for p in run["packages"]:
        if "optcc-tuned" not in p:
            continue
        c, first, second = p["clang"]["steps"], p["optcc"]["steps"], p["optcc-tuned"]["steps"]
        clang_build, clang_warm = _build_seconds(p, "clang"), c.get("warm", {}).get("seconds", 0)
        build_1, build_2 = first.get("build", {}).get("seconds", 0), _build_seconds(p, "optcc-tuned")
        warm_2 = second.get("warm", {}).get("seconds", 0)
        one, two = p["compare"], p["compare_tuned"]
        tune = p.get("tune", {})
        compiles = tune.get("summary", {}).get("compiles", "–")
        sides = ("clang", "optcc", "optcc-tuned")
        tests = " / ".join(_status(p[side]["steps"].get("test")) for side in sides)
        lines.append(
            f"| {p['package']} | {build_1:.1f} s ({_ratio(build_1, clang_build)}) | {_saved(one)} | "
            f"{tune.get('seconds', 0):.0f} ({compiles}) | {build_2:.1f} s ({_ratio(build_2, clang_build)}) | "
            f"{_saved(two)} | {warm_2:.1f} s ({_ratio(warm_2, clang_warm)}) | "
            f"{len(one['larger'])} / {len(two['larger'])} | {tests} |"
        )
        totals.update(
            clang_build=clang_build, clang_warm=clang_warm, build_1=build_1, build_2=build_2, warm_2=warm_2,
            clang_text=one["clang_text"], text_1=one["optcc_text"], text_2=two["optcc_text"],
            tune_s=tune.get("seconds", 0),
        )  # fmt: skip
    if totals["clang_text"]:
        saved_1 = 1 - totals["text_1"] / totals["clang_text"]
        saved_2 = 1 - totals["text_2"] / totals["clang_text"]
        lines.append(
            f"| **total** | {totals['build_1']:.1f} s ({_ratio(totals['build_1'], totals['clang_build'])}) | "
            f"{saved_1:.2%} | {totals['tune_s']:.0f} | "
            f"{totals['build_2']:.1f} s ({_ratio(totals['build_2'], totals['clang_build'])}) | "
            f"{saved_2:.2%} | "
            f"{totals['warm_2']:.1f} s ({_ratio(totals['warm_2'], totals['clang_warm'])}) | | |"
        )
    return "\n".join(lines) + "\n"


def _saved(compared: dict) -> str:
    clang_text = compared["clang_text"]
    return f"{(clang_text - compared['optcc_text']) / clang_text:.2%}" if clang_text else "–"


def _ratio(optcc: float, clang: float) -> str:
    return f"{optcc / clang:.2f}×" if clang >= 0.05 else "–"  # no step (a plain Makefile's configure)


def render(run: dict) -> str:
    """The markdown tables of one run."""
    load = ", ".join(f"{a:.1f}" for a in run["load_average"][0])
    lines = [
        f"Date: {run['date']}. Machine: {run['cpus']} CPU cores shared with other work (load average at the "
        f"start {load}). Service: `{run['model']['name']}` version `{run['model']['version']}` on the "
        f"{run['model']['backend']} backend, strategy {run['strategy']}, OPTCC_DEADLINE {run['deadline']} s. "
        f"optcc from {run.get('optcc_bin', 'this venv')}, bitcode tap "
        f"{'on' if run.get('bitcode_tap') else 'off'}. Command: `{run['command']}`",
        "",
        "| package | build system | lang | objects | units taken over (service won) | passed through | "
        "fell back | .text clang-19 -Oz | .text optcc | saved | larger than clang | tests clang / optcc |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    totals = Counter()
    for p in run["packages"]:
        c, o = p["compare"], p["optcc"]["steps"]
        steps = [o[s] for s in ("configure", "build", "test") if s in o]
        taken = sum(s["taken_over"] for s in steps)
        won = sum(s["service_won"] for s in steps)
        through = sum(s["passed_through"] for s in steps)
        fell = sum(s["fell_back"] for s in steps)
        saved = (c["clang_text"] - c["optcc_text"]) / c["clang_text"] if c["clang_text"] else 0.0
        tests = " / ".join(_status(p[side]["steps"].get("test")) for side in ("clang", "optcc"))
        held = " (held out)" if p["recipe"]["held_out"] else ""
        recipe = p["recipe"]
        lines.append(
            f"| {p['package']} {p['version']}{held} | {recipe['build_system']} | {recipe['language']} "
            f"| {c['objects']} | {taken} ({won}) | {through} | {fell} | {c['clang_text']} | "
            f"{c['optcc_text']} | {saved:.2%} | {len(c['larger'])} | {tests} |"
        )
        totals.update(
            objects=c["objects"], taken=taken, won=won, through=through, fell=fell, larger=len(c["larger"]),
            clang_text=c["clang_text"], optcc_text=c["optcc_text"],
        )  # fmt: skip
    saved = (
        (totals["clang_text"] - totals["optcc_text"]) / totals["clang_text"] if totals["clang_text"] else 0
    )
    lines.append(
        f"| **total** | | | {totals['objects']} | {totals['taken']} ({totals['won']}) | "
        f"{totals['through']} | {totals['fell']} | {totals['clang_text']} | {totals['optcc_text']} | "
        f"{saved:.2%} | **{totals['larger']}** | |"
    )
    lines += [
        "",
        "Wall seconds per step, clang-19 / optcc (ratio). Cold: the first build, optcc's cache empty; warm: "
        "the build again after the build system's clean, sources unchanged.",
        "",
        "| package | configure | build cold | build warm | warm units from cache | warm objects identical "
        "| tests |",
        "|---|---|---|---|---:|---:|---|",
    ]
    time_totals = Counter()
    for p in run["packages"]:
        c, o = p["clang"]["steps"], p["optcc"]["steps"]
        cells = []
        for step in ("configure", "build", "warm"):
            clang_s, optcc_s = c.get(step, {}).get("seconds", 0), o.get(step, {}).get("seconds", 0)
            time_totals.update({f"clang_{step}": clang_s, f"optcc_{step}": optcc_s})
            cells.append(f"{clang_s:.1f} / {optcc_s:.1f} ({_ratio(optcc_s, clang_s)})")
        warm, rebuilt = o.get("warm", {}), p["optcc"].get("warm_objects", 0)
        identical = rebuilt - len(p["optcc"].get("warm_changed", []))
        tests = f"{c.get('test', {}).get('seconds', 0):.1f} / {o.get('test', {}).get('seconds', 0):.1f}"
        hits = f"{warm.get('from_cache', 0)} of {warm.get('taken_over', 0)}"
        lines.append(
            f"| {p['package']} | {' | '.join(cells)} | {hits} | {identical} of {rebuilt} | {tests} |"
        )
    cells = []
    for step in ("configure", "build", "warm"):
        clang_s, optcc_s = time_totals[f"clang_{step}"], time_totals[f"optcc_{step}"]
        cells.append(f"**{clang_s:.1f} / {optcc_s:.1f} ({_ratio(optcc_s, clang_s)})**")
    lines.append(f"| **total** | {' | '.join(cells)} | | | |")
    return "\n".join(lines) + "\n"


def unit_statistics(logs: Path, run: dict) -> dict:
    """Per-unit numbers of the optcc side from its OPTCC_LOG files: service time of the cold build's units,
    answers cut by their deadline, fallbacks by reason, units whose smaller service object was refused for an
    unsafe pass (and the bytes it had), and the in-process time of the warm build's cache hits."""
    cold, warm = [], []
    for package in (p["package"] for p in run["packages"]):
        for step, units in (("build", cold), ("test", cold), ("warm", warm)):
            path = logs / f"{package}-optcc-{step}.jsonl"
            if path.exists():
                units += [json.loads(line) for line in path.read_text().splitlines()]
    breakdown = {
        package: cold_breakdown(logs, package) for package in (p["package"] for p in run["packages"])
    }
    answered = [u for u in cold if u["outcome"] == "service"]
    unsafe = [u for u in answered if "unsafe" in (u.get("kept_clang_because") or "")]
    hits = [u["seconds"] for u in warm if u.get("from_cache")]
    return {
        "service_seconds": sorted(u["seconds"] for u in answered),
        "deadline_hit": sum(1 for u in answered if u["deadline_hit"]),
        "fallbacks": Counter(u["reason"][:120] for u in cold if u["outcome"] == "fallback"),
        "unsafe_units": len(unsafe),
        "unsafe_bytes": sum(u["clang_text"] - u["service_text"] for u in unsafe),
        "hit_seconds": sorted(hits),
        "breakdown": breakdown,
    }


def cold_breakdown(logs: Path, package: str, side: str = "optcc") -> dict:
    """Sums over the cold build's units that `side` sent to the service (its OPTCC_LOG): seconds per
    BREAKDOWN column, answers cut by the deadline, fallbacks, answers where the service compiled no -Oz."""
    path = logs / f"{package}-{side}-build.jsonl"
    units = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    units = [u for u in units if u["outcome"] in ("service", "fallback", "not_asked") and "clang_s" in u]
    return {
        "units": len(units),
        "not_asked": sum(1 for u in units if u["outcome"] == "not_asked"),
        "deadline_hit": sum(1 for u in units if u.get("deadline_hit")),
        "fallback": sum(1 for u in units if u["outcome"] == "fallback"),
        "oz_skipped": sum(1 for u in units if u.get("oz_skipped")),  # with clang's size: -Oz not finished
        "told": sum(
            1 for u in units if u.get("baseline_cost")
        ),  # clang's size sent (older logs lack the field)
        "oz_won": sum(1 for u in units if u.get("winner") == "service" and u.get("best_source") == "oz"),
        "service_won": sum(1 for u in units if u.get("winner") == "service"),
        **{key: round(sum(u.get(key) or 0.0 for u in units), 1) for key in BREAKDOWN},
        "median_ratio": statistics.median(
            [u["seconds"] / u["clang_s"] for u in units if u["clang_s"] and "seconds" in u] or [0]
        ),
    }


def render_before_after(run: dict, logs: Path) -> str:
    """Both optcc sides' cold builds, unit by unit: optcc, and the third side: optcc-oz (without clang's
    .text size given to the service, which then compiles its own -Oz as the baseline and the input) or
    optcc-budget (another OPTCC_BUDGET)."""
    budget = run.get("compare_budget")
    if run.get("compare_optcc"):
        labels = (
            ("optcc-main", "compare_main", f"optcc of {run['compare_optcc']}"),
            ("optcc", "compare", "this optcc"),
        )
        return _render_sides(run, logs, labels)
    default = "optcc's default" if run.get("budget") is None else str(run["budget"])
    labels = (
        (
            ("optcc-oz", "compare_oz", "before: -Oz on the service"),
            ("optcc", "compare", "after: clang's size given"),
        )
        if budget is None
        else (
            ("optcc", "compare", f"budget {default}"),
            ("optcc-budget", "compare_budget", f"budget {budget}"),
        )
    )
    return _render_sides(run, logs, labels)


def _render_sides(run: dict, logs: Path, labels) -> str:
    """The cold build unit by unit of each (side, results key, label) in `labels`."""
    lines = [
        "",
        "Cold build, unit by unit (sums over the units sent to the service; `told` units were sent clang's "
        "`.text` size; `-Oz won`: the service's -Oz was the object written; `-Oz unfinished`: the answer "
        "had no -Oz (`oz_skipped`: with `told`, the deadline came before its compile, or the service did not "
        "compile -Oz beside a client's baseline); "
        "`optcc / clang` is optcc's whole time per unit over clang's own compile of the same unit, which ran "
        "beside it; `.text saved` over every object of the package):",
        "",
        "| package | side | units | not sent | told | -Oz unfinished | -Oz won | service won "
        "| cut by deadline | fell back | clang (s) | service call (s) | in the service (s) | compiling (s) "
        "| optcc per unit (s) | optcc / clang | with optcc's imports | median unit's optcc / clang "
        "| .text saved | larger | build cold (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in run["packages"]:
        for side, key, label in labels:
            if side not in p:
                continue
            row, c = cold_breakdown(logs, p["package"], side), p[key]
            saved = (c["clang_text"] - c["optcc_text"]) / c["clang_text"] if c["clang_text"] else 0.0
            ratio = row["seconds"] / row["clang_s"] if row["clang_s"] else 0.0
            whole = (row["seconds"] + row["before_s"]) / row["clang_s"] if row["clang_s"] else 0.0
            build = p[side]["steps"].get("build", {}).get("seconds", 0.0)
            lines.append(
                f"| {p['package']} | {label} | {row['units']} | {row['not_asked']} | {row['told']} "
                f"| {row['oz_skipped']} "
                f"| {row['oz_won']} | {row['service_won']} "
                f"| {row['deadline_hit']} | {row['fallback']} | {row['clang_s']:.1f} "
                f"| {row['service_s']:.1f} | {row['service_total_s']:.1f} | {row['service_compile_s']:.1f} "
                f"| {row['seconds']:.1f} | {ratio:.2f} | {whole:.2f} | {row['median_ratio']:.2f} "
                f"| {saved:.2%} "
                f"| {len(c['larger'])} | {build:.1f} |"
            )
    return "\n".join(lines) + "\n"


def render_units(stats: dict) -> str:
    def quantile(values: list[float], q: float) -> str:
        return f"{values[min(len(values) - 1, int(q * len(values)))]:.2f}" if values else "–"

    times = stats["service_seconds"]
    lines = [
        "",
        f"Units the service answered in the cold builds and tests: {len(times)}, optcc's time per unit "
        f"(clang beside the service call) p50 {quantile(times, 0.5)} s, p90 {quantile(times, 0.9)} s, max "
        f"{quantile(times, 1.0)} s; {stats['deadline_hit']} answers cut by the deadline. Smaller service "
        f"objects refused for an unsafe pass (newgvn): {stats['unsafe_units']} units, "
        f"{stats['unsafe_bytes']} B of .text. Warm cache hits: {len(stats['hit_seconds'])}, in-process time "
        f"p50 {quantile(stats['hit_seconds'], 0.5)} s, p90 {quantile(stats['hit_seconds'], 0.9)} s.",
    ]
    for reason, count in sorted(stats["fallbacks"].items()):
        lines.append(f"Fallback ({count}): {reason}")
    if any(row["units"] for row in stats.get("breakdown", {}).values()):
        lines += [
            "",
            "Where the cold build's time went, unit by unit (seconds summed over the units optcc sent to the "
            "service; units compile side by side under -j2, so the sums exceed the wall time): clang's own "
            "compile, the IR step (beside clang), the deadline optcc gave the service, the service call's "
            "wall time, the part of it the service reports, and within that the model's and the compiler "
            "workers' time; `unit` is optcc's whole "
            "time per unit.",
            "",
            "| package | units | not sent | cut by deadline | fell back | "
            + " | ".join(BREAKDOWN.values())
            + " |",
            "|---|---:|---:|---:|---:|" + "---:|" * len(BREAKDOWN),
        ]
        for package, row in stats["breakdown"].items():
            cells = [str(row["units"]), str(row["not_asked"]), str(row["deadline_hit"]), str(row["fallback"])]
            cells += [f"{row[key]:.1f}" for key in BREAKDOWN]
            lines.append(f"| {package} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _status(step: dict | None) -> str:
    if step is None:
        return "not run"
    return "pass" if step["rc"] == 0 else f"FAIL ({step['rc']})"


if __name__ == "__main__":
    sys.exit(main())
