"""Keeps a fuzzing campaign's crashers and writes its report (benchmarks/reliability_campaign.py `record`).

Each signature's minimized input (minimized.json, else the first input found) is checked again here
against the intake as it is now (optserve/testing/fuzz/intake_target.py) and kept under
tests/data/reliability/intake_crashers/ with index.json (file -> signature, hits, outcome then and now),
which tests/reliability/test_reliability_intake_campaign.py replays, unless the signature is one of the
bitcode crashers kept before (tests/data/reliability/bitcode_crashers/index.json). The report is the
`fuzz_campaign` section of docs/bench/reliability.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from optserve.testing.fuzz.crash_signatures import CRASHERS, HANG_S, KNOWN, canonical
from optserve.testing.fuzz.fuzz_isolation import Isolated
from optserve.testing.fuzz.intake_target import Corpus, check_intake
from optserve.testing.reliability_report import write_section

SUFFIX = {"bitcode": "bc", "text": "ll"}


def record(result: dict, folders: list[str], command: str) -> None:
    minimized: dict[str, str] = {}
    for folder in folders:
        if (Path(folder) / "minimized.json").exists():
            minimized |= json.loads((Path(folder) / "minimized.json").read_text())
    known = {canonical(f"bitcode | {sig}"): name for name, sig in json.loads(KNOWN.read_text()).items()}
    isolated, corpus = Isolated(check_intake, HANG_S), None
    CRASHERS.mkdir(parents=True, exist_ok=True)
    index, rows = {}, []
    for key, entry in sorted(result["found"].items(), key=lambda item: -item[1]["count"]):
        if key in minimized:
            data = base64.b64decode(minimized[key])
        elif "input" in entry:
            data = base64.b64decode(entry["input"])
        else:
            corpus = corpus or Corpus()
            data = corpus.make(entry["seed"], entry["first"])[1]
        kind, outcome = key.split(" | ", 1)
        now = isolated.run(data)
        if key in known:
            kept = f"bitcode_crashers/{known[key]} (kept before)"
        else:
            name = f"{entry['kind']}-{hashlib.blake2b(data, digest_size=6).hexdigest()}.{SUFFIX[kind]}"
            (CRASHERS / name).write_bytes(data)
            index[name] = {
                "signature": key,
                "hits": entry["count"],
                "found_as": entry["kind"],
                "now": now.kind,
            }
            kept = name
        cell = outcome[:150].replace("|", "/")
        rows.append(f"| {kind} | {cell} | {entry['count']} | {len(data)} | {now.kind} | {kept} |")
    (CRASHERS / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    write_section("fuzz_campaign", _report(result, rows, command, len(index)))
    print(f"{len(result['found'])} signatures, {len(index)} kept in {CRASHERS}")


def _report(result: dict, rows: list[str], command: str, new: int) -> str:
    runs = [s for s in result["summaries"] if s.get("inputs_this_call")]
    wall = sum(s["wall_seconds"] for s in runs)
    workers = max((s["workers"] for s in runs), default=1)
    machine = runs[0]["machine"] if runs else "?"
    inputs, busy = result["inputs"], result["busy_seconds"]
    counts = result["counts"]
    table = "\n".join(
        f"| {kind} | {sum(numbers.values())} | {numbers['accepted']} | {numbers['rejected']} | "
        f"{numbers['crash']} | {numbers['failed']} | {numbers['hang']} |"
        for kind, numbers in counts.items()
    )
    when = ", ".join(s["started_utc"] + " UTC" for s in runs)
    return f"""## Fuzzing campaign of the IR intake: {inputs:,} inputs on the lent host (issue 38)

- date: {when}; machine: the lent host, {machine} (Python {runs[0]["python"] if runs else "?"}, our
  llvmlite 0.47 = LLVM 20.1.8 with assertions, carried); {workers} workers, one per core
- commands: {command}
- rate: **{inputs / wall:,.0f} inputs/s** in all ({wall:.0f} s wall), **{inputs / busy:,.0f} inputs/s per
  core** ({busy:,.0f} worker-seconds, input making included)
- target: optserve/testing/fuzz/intake_target.py as run then: `parse_ir` (bitcode or text, verified), then
  `normalize_ir` of the text and `split_functions` (the engine reads `normalized_lines`, text only: the
  target now checks that, see below); a child checks input after input and is replaced when one kills it
  (optserve/testing/fuzz/fuzz_isolation.py `run_many`, address space limited to 2 GiB more than the parent's,
  a hang is > {HANG_S} s)
- inputs (optserve/testing/fuzz/intake_target.py `Corpus`, each a function of seed and index, so a chunk of
  indices is checked the same in any call): half bitcode of tests/data/reliability/bitcode_seeds (12 modules
  by clang-19): 1-3 record fields rewritten in place (optserve/testing/fuzz/bitcode_records.py walks each
  record's operands), then or instead block drops, repeats, swaps and splices between two modules, length
  edits, truncations, bit flips; half IR text (tests/data/**/*.ll and the seeds' text): characters and bytes
  flipped, line spans and whole functions spliced between two modules, truncations, tokens replaced
  (numbers, types, keywords, another module's token), removed or repeated

| input | inputs | accepted | refused (IRError) | crashes | other failures | hangs |
|---|---|---|---|---|---|---|
{table}

Distinct outcomes (signature: input kind, signal and LLVM's assertion or fatal message, or the exception;
no stack frames: llvmlite's LLVM prints none): **{len(rows)}**, of which {new} new ones are kept under
tests/data/reliability/intake_crashers/ (index.json) and replayed by
tests/reliability/test_reliability_intake_campaign.py, each in a child: it must crash only that child, be
refused with an IRError, or hang (cut at {HANG_S} s), never fail otherwise. The others were kept before in
bitcode_crashers/. Inputs were minimized for 25 s each on the lent host (whole lines, then cuts off the end,
then byte chunks); bitstreams seldom shrink (a deletion shifts every later bit). "now": the outcome of the
kept input against today's target.

| input | outcome | hits | bytes kept | now | kept as |
|---|---|---|---|---|---|
{chr(10).join(rows)}
"""
