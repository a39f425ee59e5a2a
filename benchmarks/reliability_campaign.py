"""A long fuzzing campaign of the IR intake: a million inputs and more, over every core, resumable
across calls on a lent host, its crashes deduplicated and minimized.

Inputs are numbered: input `i` of seed `s` is a function of (s, i) alone (its own `random.Random`), so a
campaign is split into chunks of consecutive indices that any process, in any call, on any host with the same
seeds and llvmlite, checks the same way. Half are mutated bitcode (tests/data/reliability/bitcode_seeds):
record fields rewritten in place (optserve/testing/fuzz/bitcode_records.py), then or instead block drops,
repeats, swaps, splices between two modules, length edits, truncations, bit flips
(optserve/testing/fuzz/bitcode_mutations.py); half are mutated IR text (tests/data/**/*.ll and the seeds'
text): characters and bytes flipped, line spans and functions spliced between two modules, truncations, tokens
edited (optserve/testing/fuzz/ir_text_mutations.py).

The target is the intake as the service runs it (optserve/testing/fuzz/intake_target.py: parse_ir, then
normalize_ir and split_functions). One worker process per core checks its chunks through a persistent child
(optserve/testing/fuzz/fuzz_isolation.py `run_many`: the child checks input after input and is replaced when
one kills it, under an address-space limit; a hang is over HANG_S); each finished chunk is one JSON line in
the output folder, with its counts and, for each crash or failure signature the worker has not reported yet,
the input. A later call given those lines (`--done`) checks only the chunks not in them.

    # on the lent host (benchmarks/reliability_campaign_lent.sh), or here:
    python benchmarks/reliability_campaign.py run --seed 38 --total 1000000 --out runs/reliability_campaign/a
    python benchmarks/reliability_campaign.py minimize runs/reliability_campaign/*/ --out DIR
    python benchmarks/reliability_campaign.py record runs/reliability_campaign/*/ --command "..."
    python benchmarks/reliability_campaign.py shrink-kept --seconds 60   # the kept crashers, smaller
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

from optserve.testing.fuzz import bitcode_mutations
from optserve.testing.fuzz.crash_signatures import CRASHERS, HANG_S, canonical, signature
from optserve.testing.fuzz.fuzz_isolation import Isolated, shrink
from optserve.testing.fuzz.intake_target import Corpus, check_intake

REPO = Path(__file__).resolve().parent.parent
CHUNK = 1000  # inputs per chunk (a few seconds of one worker)
KINDS = ("accepted", "rejected", "failed", "crash", "hang")
_CORPUS: Corpus | None = None  # the minimizer's, for inputs given by index


# --- run --------------------------------------------------------------------------------------------------


def done_chunks(folders: list[Path], seed: int, chunk: int) -> set[int]:
    done = set()
    for folder in folders:
        for line in _lines(folder):
            if line["seed"] == seed and line["chunk_size"] == chunk:
                done.add(line["chunk"])
    return done


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("chunks-*.jsonl")) for line in path.open()]


def _worker(number: int, chunks: list[int], args, corpus: Corpus, deadline: float) -> None:
    """Check `chunks` in order until done or `deadline` (monotonic); one JSON line per finished chunk."""
    isolated = Isolated(check_intake, HANG_S)
    reported: set[str] = set()
    path = Path(args.out) / f"chunks-{os.getpid()}-{number}.jsonl"
    with path.open("a") as out:
        for chunk in chunks:
            if time.monotonic() > deadline:
                return
            started = time.monotonic()
            first = chunk * args.chunk
            indices = range(first, min(first + args.chunk, args.total))
            inputs = [corpus.make(args.seed, index) for index in indices]
            made = time.monotonic() - started
            outcomes = isolated.run_many([data for _, data in inputs])
            counts = {kind: dict.fromkeys(KINDS, 0) for kind in ("bitcode", "text")}
            found: dict[str, dict] = {}
            for index, (kind, data), outcome in zip(indices, inputs, outcomes, strict=True):
                counts[kind][outcome.kind] += 1
                if outcome.kind in ("failed", "crash", "hang"):
                    key = signature(kind, outcome)
                    entry = found.setdefault(key, {"count": 0, "first": index, "kind": outcome.kind})
                    entry["count"] += 1
                    if key not in reported:
                        reported.add(key)
                        entry["input"] = base64.b64encode(data).decode()
                        entry["detail"] = outcome.detail[-1500:]
            record = {
                "seed": args.seed,
                "chunk_size": args.chunk,
                "chunk": chunk,
                "inputs": len(indices),
                "seconds": round(time.monotonic() - started, 3),
                "make_seconds": round(made, 3),
                "counts": counts,
                "found": found,
            }
            out.write(json.dumps(record) + "\n")
            out.flush()


def run(args) -> None:
    """Check the chunks of [0, total) not done yet, one worker per core, until done or the time limit."""
    started, wall = time.monotonic(), time.time()
    corpus = Corpus()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = done_chunks([Path(folder) for folder in args.done] + [out], args.seed, args.chunk)
    pending = [c for c in range(-(-args.total // args.chunk)) if c not in done]
    workers = args.workers or os.cpu_count() or 1
    deadline = started + args.time_limit
    print(f"seeds {corpus.digest()}: {len(pending)} chunks to check, {len(done)} done, {workers} workers")
    context = multiprocessing.get_context("fork")
    processes = [
        context.Process(target=_worker, args=(n, pending[n::workers], args, corpus, deadline))
        for n in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    lines = _lines(out)
    summary = {
        "seed": args.seed,
        "total": args.total,
        "chunk_size": args.chunk,
        "workers": workers,
        "cpus": os.cpu_count(),
        "seeds_digest": corpus.digest(),
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wall)),
        "wall_seconds": round(time.monotonic() - started, 1),
        "inputs_this_call": sum(line["inputs"] for line in lines),
        "busy_seconds": round(sum(line["seconds"] for line in lines), 1),
        "python": sys.version.split()[0],
        "machine": _machine(),
    }
    (out / f"summary-{int(wall)}.json").write_text(json.dumps(summary, indent=1) + "\n")
    remaining = len(pending) - len(lines)
    print(json.dumps(summary), f"chunks left: {remaining}", sep="\n")


def _machine() -> str:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = "unknown CPU"
    return f"{model}, {os.cpu_count()} CPUs"


# --- results ----------------------------------------------------------------------------------------------


def collect(folders: list[Path]) -> dict:
    """Every chunk of the given output folders (each chunk once): counts, and per signature its hits and
    first input."""
    chunks: dict[tuple, dict] = {}
    summaries = []
    for folder in folders:
        for line in _lines(folder):
            chunks.setdefault((line["seed"], line["chunk_size"], line["chunk"]), line)
        summaries += [json.loads(path.read_text()) for path in sorted(folder.glob("summary-*.json"))]
    counts = {kind: dict.fromkeys(KINDS, 0) for kind in ("bitcode", "text")}
    found: dict[str, dict] = {}
    for line in sorted(chunks.values(), key=lambda line: line["chunk"]):
        for kind, numbers in line["counts"].items():
            for outcome, number in numbers.items():
                counts[kind][outcome] += number
        for key, entry in line["found"].items():
            key = canonical(key)  # noqa: PLW2901 - older lines may hold a finer name
            known = found.setdefault(
                key, {"count": 0, "first": entry["first"], "kind": entry["kind"], "seed": line["seed"]}
            )
            known["count"] += entry["count"]
            if "input" in entry and ("input" not in known or entry["first"] < known["first"]):
                known.update(first=entry["first"], input=entry["input"], detail=entry["detail"])
    return {
        "chunks": list(chunks.values()),
        "counts": counts,
        "found": found,
        "summaries": summaries,
        "inputs": sum(line["inputs"] for line in chunks.values()),
        "busy_seconds": sum(line["seconds"] for line in chunks.values()),
    }


def _minimize_one(item: tuple[str, dict, float]) -> tuple[str, str]:
    """(signature, the smallest input found within `seconds` that gives the same signature, base64)."""
    key, entry, seconds = item
    kind = key.split(" | ", 1)[0]
    if "input" in entry:
        data = base64.b64decode(entry["input"])
    else:  # given by its index: made again
        data = _CORPUS.make(entry["seed"], entry["first"])[1]
    isolated = Isolated(check_intake, HANG_S)
    ends = time.monotonic() + seconds

    def same(candidate: bytes) -> bool:
        return signature(kind, isolated.run(candidate)) == key

    if not same(data):  # not reproduced alone (it needed the child's state): kept as found
        return key, base64.b64encode(data).decode()
    keep = len(bitcode_mutations.MAGIC) if kind == "bitcode" else 0
    data = shrink(data, same, keep, lines=kind == "text", ends=ends)
    return key, base64.b64encode(data).decode()


def minimize(args) -> None:
    """Minimize each signature's first input (in parallel, `--seconds` each); writes minimized.json."""
    global _CORPUS  # noqa: PLW0603 - made once, before the pool forks
    _CORPUS = Corpus()
    result = collect([Path(folder) for folder in args.folders])
    items = [(key, entry, args.seconds) for key, entry in result["found"].items()]
    with multiprocessing.get_context("fork").Pool(args.workers or os.cpu_count()) as pool:
        small = dict(pool.imap_unordered(_minimize_one, items))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "minimized.json").write_text(json.dumps(small, indent=0) + "\n")
    for key, _, _ in items:
        print(f"{len(base64.b64decode(small[key])):>6} bytes  {key[:140]}")


def _shrink_file(item: tuple[Path, float]) -> tuple[str, int, bytes | None, str]:
    """(name, bytes before, a smaller input with the same signature here or None, that signature)."""
    path, seconds = item
    kind = "bitcode" if path.suffix == ".bc" else "text"
    data = path.read_bytes()
    isolated = Isolated(check_intake, HANG_S)
    wanted = signature(kind, isolated.run(data))
    if " | SIG" not in wanted:  # only what crashes here: a hang costs HANG_S a try, the rest is answered
        return path.name, len(data), None, wanted
    ends = time.monotonic() + seconds

    def same(candidate: bytes) -> bool:
        return signature(kind, isolated.run(candidate)) == wanted

    keep = len(bitcode_mutations.MAGIC) if kind == "bitcode" else 0
    small = shrink(data, same, keep, lines=kind == "text", ends=ends)
    return path.name, len(data), small if len(small) < len(data) else None, wanted


def shrink_kept(args) -> None:
    """Minimize kept crashers again, in place: each file of `--folder` matching `--glob`, `--seconds` each, in
    parallel workers (every try in a forked child: a crash ends the child, not the minimizer). A file is
    replaced only by a smaller input that crashes here with the same signature, checked once more."""
    paths = sorted(Path(args.folder).glob(args.glob))
    with multiprocessing.get_context("fork").Pool(args.workers or os.cpu_count()) as pool:
        results = list(pool.imap_unordered(_shrink_file, [(path, args.seconds) for path in paths]))
    isolated, sizes = Isolated(check_intake, HANG_S), {}
    for name, before, small, wanted in sorted(results):
        path = Path(args.folder) / name
        kind = "bitcode" if path.suffix == ".bc" else "text"
        if small is not None and signature(kind, isolated.run(small)) == wanted:
            path.write_bytes(small)
        sizes[name] = (before, path.stat().st_size)
        print(f"{before:>6} -> {sizes[name][1]:>6} bytes  {name}  {wanted[:100]}", flush=True)
    Path(args.sizes).write_text(json.dumps(sizes, indent=0) + "\n")


def _all(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("run", help="check chunks of the campaign")
    one.add_argument("--seed", type=int, required=True)
    one.add_argument("--total", type=int, default=1_000_000)
    one.add_argument("--chunk", type=int, default=CHUNK)
    one.add_argument("--workers", type=int, default=0, help="default: one per CPU")
    one.add_argument("--time-limit", type=float, default=540, help="seconds; no chunk starts after it")
    one.add_argument("--out", required=True, help="folder for this call's chunk lines")
    one.add_argument("--done", nargs="*", default=[], help="earlier calls' folders: their chunks are skipped")
    two = commands.add_parser("minimize", help="minimize the first input of each signature")
    two.add_argument("folders", nargs="+")
    two.add_argument("--seconds", type=float, default=30)
    two.add_argument("--workers", type=int, default=0)
    two.add_argument("--out", required=True)
    four = commands.add_parser("shrink-kept", help="minimize kept crashers again, in place")
    four.add_argument("--folder", default=str(CRASHERS))
    four.add_argument("--glob", default="crash-*.bc")
    four.add_argument("--seconds", type=float, default=60)
    four.add_argument("--workers", type=int, default=0)
    four.add_argument("--sizes", default=str(REPO / "runs" / "reliability_campaign" / "shrunk.json"))
    three = commands.add_parser("record", help="keep minimized crashers, write the report section")
    three.add_argument("folders", nargs="+", help="run folders, and the folder of minimized.json")
    three.add_argument("--command", required=True, help="the command line(s) that ran, for the report")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
    elif args.command == "minimize":
        minimize(args)
    elif args.command == "shrink-kept":
        shrink_kept(args)
    else:
        from optserve.testing.fuzz.campaign_report import record

        record(collect([Path(folder) for folder in args.folders]), args.folders, args.command)


if __name__ == "__main__":
    _all(sys.argv[1:])
