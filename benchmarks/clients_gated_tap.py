"""A marked unit's rebuild (a record of clang's object kept, the unit waiting for tuning:
clients/baseline_memo.py) the two ways optcc can take it, per unit of a tree (docs/tuning.md, the tap's gate):

  two-process   OPTCC_TAP=0: the IR step, the service asked first with clang's size, clang's back end if
                the service's object loses
  gated         the bitcode tap's one clang process, waiting at the tap's gate for the same comparison;
                stopped there when the service's object wins

    python benchmarks/clients_gated_tap.py --server 127.0.0.1:29620 [--tree data/clients/builds/mxml/clang]
        [--rounds 15] [--work runs/clients/gated-tap]

The service's tuning store decides which units win: start the service on a store `optserve tune` tuned
for the tree's units (built with the same flags; mxml's own below), e.g. `OPTSERVE_TUNING_DIR=DIR optserve
serve`. Each unit's record is made once (a two-process run keeps one for every unit); every run then marks
the unit again (a unit tuned to nothing loses its mark), starts with an empty object cache (the cache on, as
in a build: the dependency file is written) and runs optcc in its own process (OPTCC_RESIDENT=0). Rounds
alternate which way goes first; clang-19 alone runs after both. The table: medians of optcc's own unit time
(its log's `seconds`), of the paired differences (gated - two-process) and of the commands' wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from optserve.config import REPO_ROOT

# mxml's own flags (its Makefile's CFLAGS)
MXML_CFLAGS = (
    "-g -Os -D_GNU_SOURCE -Oz -D_THREAD_SAFE -D_REENTRANT -D_FORTIFY_SOURCE=2 -Wall -Wunused "
    "-Wno-char-subscripts -Wno-format-truncation -Wno-format-y2k -Wno-switch -Wno-unused-result"
)
FLAGS = MXML_CFLAGS.split()
OPTCC = str(Path(sys.executable).with_name("optcc"))


def command(compiler: str, unit: str) -> list[str]:
    return [compiler, *FLAGS, "-c", "-o", unit[:-2] + ".o", unit]


def marks(tree: Path, records: Path, units: list[str]) -> dict[str, Path]:
    """Each unit's output mark, as optcc run in `tree` names it (baseline_memo.mark_output)."""
    from optserve.clients import baseline_memo
    from optserve.clients.command_line import decide

    here = os.getcwd()
    os.chdir(tree)
    try:
        found = {}
        for unit in units:
            decision = decide(command("clang-19", unit)[1:])
            found[unit] = baseline_memo._output_mark(str(records), decision.job, decision.level)
        return found
    finally:
        os.chdir(here)


def run(args, unit: str, gated: bool) -> dict:
    """One optcc command for `unit`: its log record, with the command's wall seconds."""
    log, cache = args.work / "unit.jsonl", args.work / "cache"
    log.unlink(missing_ok=True)
    shutil.rmtree(cache, ignore_errors=True)
    env = os.environ | {
        "OPTCC_SERVER": args.server,
        "OPTCC_RESIDENT": "0",
        "OPTCC_TAP": "1" if gated else "0",
        "OPTCC_TAP_DIR": str(args.work / "tap"),
        "OPTCC_BASELINE_DIR": str(args.work / "records"),
        "OPTCC_CACHE_DIR": str(cache),
        "OPTCC_LOG": str(log),
        "TMPDIR": str(args.work / "tmp"),
    }
    started = time.monotonic()
    done = subprocess.run(command(OPTCC, unit), cwd=args.tree, env=env, capture_output=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"optcc failed on {unit}: {done.stderr.decode(errors='replace')}")
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    return record | {"wall": wall}


def clang(tree: Path, unit: str) -> float:
    started = time.monotonic()
    subprocess.run(command("clang-19", unit), cwd=tree, check=True, capture_output=True)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", required=True)
    parser.add_argument("--tree", type=Path, default=REPO_ROOT / "data/clients/builds/mxml/clang")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--work", type=Path, default=REPO_ROOT / "runs" / "clients" / "gated-tap")
    args = parser.parse_args()
    args.work = args.work.resolve()
    source = args.tree.resolve()
    args.tree = args.work / "tree"  # a copy: the objects are written there
    if not args.tree.exists():
        shutil.copytree(source, args.tree, ignore=shutil.ignore_patterns("*.o", "*.a"))
    (args.work / "tmp").mkdir(parents=True, exist_ok=True)
    from optserve.clients import bitcode_tap

    plugin, why = bitcode_tap.build(str(args.work / "tap"), "clang-19")
    if plugin is None:
        raise SystemExit(f"no bitcode tap: {why}")
    units = sorted(p.name for p in args.tree.glob("*.c") if not p.name.startswith("test"))
    unit_marks = marks(args.tree, args.work / "records", units)
    for unit in units:  # the records: the two-process way keeps one for every unit
        run(args, unit, gated=False)
    print(f"load average at the start: {os.getloadavg()}")
    results = {unit: {"two-process": [], "gated": [], "clang": []} for unit in units}
    for round_ in range(args.rounds):
        for unit in units:
            for way in ("two-process", "gated") if round_ % 2 == 0 else ("gated", "two-process"):
                unit_marks[unit].parent.mkdir(parents=True, exist_ok=True)
                unit_marks[unit].touch()
                results[unit][way].append(run(args, unit, gated=way == "gated"))
            results[unit]["clang"].append({"wall": clang(args.tree, unit)})
    print(f"load average at the end: {os.getloadavg()}")
    (args.work / "results.json").write_text(json.dumps(results))
    print("unit: the service's object (wins) or clang's; optcc's unit seconds two-process / gated, paired")
    print("difference ms; command wall seconds two-process / gated / clang-19 alone")
    for unit, ways in results.items():
        old, new = ways["two-process"], ways["gated"]
        wins = new[0].get("clang_from_record", False)
        seconds = [statistics.median(r["seconds"] for r in way) for way in (old, new)]
        paired = statistics.median(
            (n["seconds"] - o["seconds"]) * 1000 for n, o in zip(new, old, strict=True)
        )
        walls = [statistics.median(r["wall"] for r in way) for way in (old, new, ways["clang"])]
        kind = "wins" if wins else "clang"
        print(
            f"{unit:16} {kind:6} {seconds[0]:.3f} / {seconds[1]:.3f} s  {paired:+6.1f} ms"
            f"  wall {walls[0]:.3f} / {walls[1]:.3f} / {walls[2]:.3f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
