"""Fuzzing campaign of the IR intake with structure-aware mutations of real bitcode.

Inputs come from optserve/testing/fuzz/bitcode_mutations.py (seed modules by clang-19 from tests/data/c;
blocks dropped, repeated, swapped and spliced across modules, block lengths edited, truncations, bit flips)
and go to the intake's parser, compiler/ir.py's `parse_ir`, through optserve/testing/fuzz/fuzz_targets.py's
`check_bitcode`: accepted (and its text parses back to itself) or refused with an IRError, nothing else.

LLVM's bitcode reader aborts or crashes the process on some inputs, so inputs run in forked children
(optserve/testing/fuzz/fuzz_isolation.py: one child checks inputs until one kills it, the next takes the
rest).
Each distinct crash or failure (by LLVM's message, or the exception's type) is minimized afterwards and
written to tests/data/reliability/bitcode_crashers/ (with index.json: file -> outcome), which
tests/reliability/test_reliability_bitcode_fuzz.py replays.

    nice -n 10 python benchmarks/reliability_fuzz_bitcode.py --minutes 10   # -> docs/bench/reliability.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time

from optserve.testing.fuzz import bitcode_mutations, fuzz_targets
from optserve.testing.fuzz.fuzz_isolation import Isolated
from optserve.testing.reliability_report import REPO, machine, utc_now, write_section

CRASHERS = REPO / "tests" / "data" / "reliability" / "bitcode_crashers"
BATCH = 1000  # inputs per round of children
MINIMIZE_S = 20.0  # per distinct crash or failure
HANG_S = 10  # a child still parsing one input after this long is a hang (an ingress thread held as long)


def campaign(seconds: float, seed: int) -> dict:
    """Mutated bitcode through the intake until `seconds` pass: counts, and the first input of each
    distinct crash or failure."""
    bitcode_mutations.seeds()  # made before the clock starts
    isolated = Isolated(fuzz_targets.check_bitcode, HANG_S)
    rng = random.Random(seed)
    counts = {"accepted": 0, "rejected": 0, "failed": 0, "crash": 0, "hang": 0}
    seen: set[bytes] = set()
    found: dict[str, dict] = {}
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        batch = [bitcode_mutations.mutated_bitcode(rng) for _ in range(BATCH)]
        for data, outcome in zip(batch, isolated.run_many(batch), strict=True):
            counts[outcome.kind] += 1
            seen.add(hashlib.blake2b(data, digest_size=8).digest())
            if outcome.kind in ("failed", "crash", "hang"):
                entry = found.setdefault(outcome.signature, {"count": 0, "input": data, "kind": outcome.kind})
                entry["count"] += 1
    elapsed = time.monotonic() - started
    inputs = sum(counts.values())
    return {"counts": counts, "inputs": inputs, "distinct": len(seen), "seconds": elapsed, "found": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one (printed)")
    parser.add_argument("--no-write", action="store_true", help="print; write neither report nor crashers")
    args = parser.parse_args()
    seed = int.from_bytes(os.urandom(4), "little") if args.seed is None else args.seed
    result = campaign(args.minutes * 60, seed)
    counts, rate = result["counts"], result["inputs"] / result["seconds"]
    print(
        f"bitcode (seed {seed}): {result['inputs']} inputs in {result['seconds']:.0f} s ({rate:.0f}/s), "
        f"{result['distinct']} distinct, {counts}"
    )
    isolated = Isolated(fuzz_targets.check_bitcode, HANG_S)
    kept = []
    for signature, entry in sorted(result["found"].items(), key=lambda item: -item[1]["count"]):
        small = isolated.minimize(entry["input"], MINIMIZE_S)
        name = f"{entry['kind']}-{hashlib.blake2b(small, digest_size=6).hexdigest()}.bc"
        kept.append((signature, entry["count"], len(entry["input"]), len(small), name))
        sizes = f"{len(entry['input'])} -> {len(small)} bytes"
        print(f"  {entry['count']:>6} x {signature[:150]}: {sizes}, {name}")
        if not args.no_write:
            CRASHERS.mkdir(parents=True, exist_ok=True)
            (CRASHERS / name).write_bytes(small)
    if args.no_write:
        return
    index = CRASHERS / "index.json"
    known = json.loads(index.read_text()) if index.exists() else {}
    known |= {name: signature for signature, _, _, _, name in kept}
    index.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    rows = "\n".join(
        f"| {signature[:160].replace('|', '/')} | {count} | {before} -> {after} | {name} |"
        for signature, count, before, after, name in kept
    )
    write_section(
        "fuzz_bitcode",
        f"""## Fuzzing the IR intake with mutated real bitcode (structure-aware, issue 38)

- date: {utc_now()}; machine: {machine()} (shared with other jobs; `nice -n 10`)
- command: `nice -n 10 python benchmarks/reliability_fuzz_bitcode.py --minutes {args.minutes:g} --seed {seed}`
- target: compiler/ir.py `parse_ir` on bytes (what the ingress runs on every Optimize request's IR) through
  `check_bitcode` (optserve/testing/fuzz/fuzz_targets.py), in forked children (optserve/testing/fuzz/
  fuzz_isolation.py; a child checks inputs until one kills it; a hang is > {HANG_S} s)
- inputs: bitcode of tests/data/c/*.c by clang-19 (-Oz without LLVM's passes, and -O2 -g), mutated 1-4
  times: top-level blocks dropped, repeated, swapped or replaced by another module's (same block id), word
  spans spliced from another module inside a block or anywhere, block length words edited, truncations
  (anywhere, at a word, at a block's end or inside its header), bit flips, interesting 32-bit values,
  random bytes (optserve/testing/fuzz/bitcode_mutations.py)

| inputs | seconds | inputs/s | distinct | accepted | refused (IRError) | crashes | other failures | hangs |
|---|---|---|---|---|---|---|---|---|
| {result["inputs"]} | {result["seconds"]:.0f} | {rate:.0f} | {result["distinct"]} | {counts["accepted"]} | \
{counts["rejected"]} | {counts["crash"]} | {counts["failed"]} | {counts["hang"]} |

Distinct crashes, failures and hangs (by LLVM's message or the exception's type), each kept under
tests/data/reliability/bitcode_crashers/ (index.json names each one's outcome; tests/reliability/
test_reliability_bitcode_fuzz.py replays them) after at most {MINIMIZE_S:.0f} s of minimizing (prefix cuts,
then byte-chunk removal). That seldom shrank them: a bitstream's later blocks (the string table) are needed
to reach the crash, and a deletion shifts every later bit.

| outcome | times hit | bytes before -> after | kept as |
|---|---|---|---|
{rows or "| (none) | | | |"}

Outcomes other than crashes, found by fuzzing and fixed in compiler/ir.py (`_parse_bitcode`, `_module_text`,
`_text_that_parses`; tests in tests/reliability/test_reliability_bitcode_fuzz.py); a campaign run before
the fixes counts them as failures, one after them as refused: a module whose printed text is not UTF-8 (an
attribute string with byte 0xe1, from bitcode or from a `\\E1` escape in IR text) and an LLVM refusal
quoting input bytes that are not UTF-8 raised UnicodeDecodeError (answered INTERNAL); bitcode that LLVM
reads as an empty module was accepted with empty text; bitcode whose printed text LLVM's own text parser
refuses was accepted, then refused by every later step. All four are IRErrors (INVALID_ARGUMENT) now.
Hangs are children still parsing one input after {HANG_S} s (the kept one is replayed with a shorter cut);
in the service the intake's worker is stopped at the pool's time limit.

A crash kills the process that parses: in the service that is one of the compiler replica's intake workers
(serve/replicas/deployments.py `CompilerWorkers.run`), which is replaced, the call answered INVALID_ARGUMENT
with LLVM's message. llvmlite's LLVM is built with assertions, so most of these are assertion aborts in
LLVM's bitcode reader (a release build skips those checks; what it does then is not measured here).
""",
    )


if __name__ == "__main__":
    main()
