"""Long fuzzing run of the IR intake, the pass-list parser and the loop-nest parser.

Each target runs in a supervised child process: a hard crash (signal) or a hang of the parser cannot take
the fuzzer down with it; the supervisor records it, keeps the input that caused it (runs/reliability_fuzz/)
and restarts the child for the rest of the time. Exceptions other than the parser's own error type are
failures too (hypothesis reports the shrunk input).

    nice -n 10 python benchmarks/reliability_fuzz.py --minutes 10     # -> docs/bench/reliability.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from optserve.testing.reliability_report import REPO, machine, utc_now, write_section

TARGETS = ("ir", "pass_list", "loop_nest")
OUT = REPO / "runs" / "reliability_fuzz"
HANG_S = 60.0


def child(target: str, seconds: float, status_path: Path, input_path: Path) -> None:
    """Fuzz `target` until `seconds` have passed; counts and failures go to `status_path` as JSON."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from optserve.testing.fuzz import fuzz_targets as ft

    counts = {"inputs": 0, "distinct": 0, "accepted": 0, "rejected": 0, "failures": []}
    seen: set[bytes] = set()
    last_write = [0.0]

    def record(args) -> None:
        with open(input_path, "wb") as handle:  # the input under test, kept if the process dies
            pickle.dump(args, handle)

    def flush(force=False) -> None:
        now = time.monotonic()
        if force or now - last_write[0] > 1.0:
            partial = status_path.with_suffix(".tmp")
            partial.write_text(json.dumps(counts | {"heartbeat": time.time()}))
            partial.replace(status_path)  # atomic: the supervisor never reads half a file
            last_write[0] = now

    def run(check, *args):
        record(args)
        outcome = check(*args)
        counts["inputs"] += 1
        seen.add(hashlib.blake2b(repr(args).encode(), digest_size=12).digest())
        counts["distinct"] = len(seen)
        counts[outcome] += 1
        flush()

    strategies = {
        "ir": (ft.ir_inputs,),
        "pass_list": (ft.pass_list_texts,),
        "loop_nest": (ft.loop_nest_inputs(),),
    }[target]
    check = {
        "ir": ft.check_ir,
        "pass_list": ft.check_pass_list,
        "loop_nest": lambda nest: ft.check_loop_nest(*nest),
    }[target]
    deadline = time.monotonic() + seconds
    seed = int.from_bytes(os.urandom(4), "little")
    while time.monotonic() < deadline:
        seed += 1

        @settings(
            max_examples=500,
            database=None,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.tuples(*strategies))
        def fuzz(args):
            run(check, *args)

        fuzz._hypothesis_internal_use_seed = seed
        try:
            fuzz()
        except Exception:  # noqa: BLE001 - a real failure: keep it and go on with a new seed
            counts["failures"].append(traceback.format_exc(limit=3)[-2000:])
        flush(force=True)


def supervise(target: str, seconds: float) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    status_path, input_path = OUT / f"{target}.status.json", OUT / f"{target}.input.pkl"
    totals = {
        "target": target,
        "inputs": 0,
        "distinct": 0,
        "accepted": 0,
        "rejected": 0,
        "failures": [],
        "crashes": [],
    }
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 1:
        status_path.unlink(missing_ok=True)
        command = [sys.executable, __file__, "--child", target, "--seconds", str(left)]
        process = subprocess.Popen(command + ["--status", str(status_path), "--input", str(input_path)])
        started = time.monotonic()
        hung = False
        while process.poll() is None:
            time.sleep(1.0)  # a poll of the child's progress file, not synchronisation
            beat = json.loads(status_path.read_text())["heartbeat"] if status_path.exists() else None
            if time.time() - (beat or time.time() - (time.monotonic() - started)) > HANG_S:
                process.kill()
                hung = True
        status = json.loads(status_path.read_text()) if status_path.exists() else {}
        for key in ("inputs", "distinct", "accepted", "rejected"):
            totals[key] += status.get(key, 0)
        totals["failures"] += status.get("failures", [])
        if process.returncode != 0 or hung:
            kept = OUT / f"{target}.crash-{len(totals['crashes'])}.pkl"
            if input_path.exists():
                input_path.replace(kept)
            why = "hang" if hung else f"exit {process.returncode} ({_signal_name(process.returncode)})"
            totals["crashes"].append({"why": why, "input": str(kept)})
            totals["inputs"] += 1  # the input that killed it
    return totals


def _signal_name(returncode: int) -> str:
    return signal.Signals(-returncode).name if returncode < 0 else "no signal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="total over the three targets")
    parser.add_argument("--child", choices=TARGETS)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--status", type=Path)
    parser.add_argument("--input", type=Path)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seconds, args.status, args.input)
        return
    started = time.monotonic()
    shares = {"ir": 0.5, "pass_list": 0.2, "loop_nest": 0.3}  # the IR intake is the largest surface
    results = [supervise(target, args.minutes * 60 * shares[target]) for target in TARGETS]
    elapsed = time.monotonic() - started
    for result in results:
        print(
            f"{result['target']}: {result['inputs']} inputs, {result['distinct']} distinct "
            f"({result['accepted']} accepted, "
            f"{result['rejected']} rejected), {len(result['crashes'])} crashes, "
            f"{len(result['failures'])} failures"
        )
        for item in result["crashes"] + result["failures"]:
            print("  ", item)
    if args.no_write:
        return
    rows = "\n".join(
        f"| {r['target']} | {r['inputs']} | {r['distinct']} | {r['accepted']} | {r['rejected']} | "
        f"{len(r['crashes'])} | {len(r['failures'])} |"
        for r in results
    )
    write_section(
        "fuzz",
        f"""## Fuzzing (hypothesis): IR intake, pass-list parser, loop-nest parser

- date: {utc_now()}; machine: {machine()} (shared with other jobs; `nice -n 10`)
- command: `nice -n 10 python benchmarks/reliability_fuzz.py --minutes {args.minutes:g}`
- wall time: {elapsed / 60:.1f} min (shares: IR 50 %, pass lists 20 %, loop nests 30 %)
- each target runs in a supervised child process; a crash (signal) or a hang > {HANG_S:.0f} s would be counted
  and its input kept under runs/reliability_fuzz/

| target | inputs tried | distinct inputs | accepted | rejected with its error | crashes | other failures |
|---|---|---|---|---|---|---|
{rows}

Inputs: mutated valid modules (cuts, duplications, inserted IR tokens, changed characters, nested
array types up to 400 deep), IR token soup, random text, random bytes and bitcode magic + garbage; pass lists
of real names, meta flags and random words (up to {24 * 40} names); contractions built from index names,
index sums and wrong operators, with sizes that are negative, huge (±2^70), booleans, floats and text.
Checked: the parser accepts (and its output parses back to the same thing) or raises its own error with
a message; nothing else.

"distinct" counts inputs by content (hypothesis repeats some simple examples in every round).

Crashes found while building these tests (both in the ingress process, which parses every request's IR),
fixed in `compiler/ir.py` and covered by tests:
1. an array type nested ~30,000 deep (300 KB, under the size limit) made LLVM's parser overflow the stack
   (segfault): nesting deeper than `MAX_NESTING` (1000) is now refused with an IRError before parsing;
2. a module rejected by the verifier or the target check was left to the garbage collector inside a
   reference cycle (exception -> traceback -> frame) together with its own LLVM context; the collector
   could dispose of the context first, and disposing of the module then segfaulted in
   `LLVMContext::removeModule` (seen as an ingress replica dying under the bad-input tests; reproduced in
   2,000 parses in a loop). A rejected module is now disposed of at once.
""",
    )


if __name__ == "__main__":
    main()
