"""optcc's own cost per translation unit: what the wrapper adds to the user's clang, service time aside.

    python benchmarks/clients_overhead.py [--source tests/data/clients/wordstat/main.c] [--runs 20]
        [--server 127.0.0.1:29000]

Times (wall, median and fastest of --runs, one compile at a time) of:
  python -c pass                                     an empty interpreter of this venv (its site, .pth files)
  clang -O2 -c            and  optcc -O2 -c          a unit optcc passes through: Python start + imports
  clang -Oz -c            and  optcc -Oz -c          taken over, service known unreachable in this build
                                                     (the IR step runs beside clang's own compile)
  optcc -Oz -c, --server  the whole round trip with a running service (the service's time included;
                          OPTCC_CACHE=0)
  optcc -Oz -c, --server  a hit in optcc's object cache (filled by one compile first): the rebuild of an
                          unchanged unit
and the import time of optcc's modules on the compile path and on the service path, in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], runs: int, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(median, fastest) wall seconds of `runs` runs of `command`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times)


def import_seconds(statement: str, runs: int) -> float:
    """Fastest time of a fresh interpreter running `statement`, minus an empty interpreter's."""

    def fastest(code: str) -> float:
        return timed([sys.executable, "-c", code], runs, dict(os.environ), ROOT)[1]

    return fastest(statement) - fastest("pass")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, default=ROOT / "tests/data/clients/wordstat/main.c")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--server", help="host:port of a running service, for the round trip")
    args = parser.parse_args()
    source = args.source.resolve()
    flags = ["-I", str(source.parent), "-c", str(source), "-o", "unit.o"]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        # An unreachable service marked in this build's state: no gRPC call, as for units after the first.
        down = os.environ | {"TMPDIR": scratch, "OPTCC_SERVER": "127.0.0.1:1", "OPTCC_RETRY": "3600"}
        subprocess.run([BIN / "optcc", "-Oz", *flags], env=down, cwd=work, capture_output=True, check=True)
        interpreter = timed([sys.executable, "-c", "pass"], args.runs, down, work)
        rows.append(("this venv's python -c pass (interpreter start)", interpreter, ""))
        for level in ("-O2", "-Oz"):
            clang = timed(["clang-19", level, *flags], args.runs, down, work)
            optcc = timed([str(BIN / "optcc"), level, *flags], args.runs, down, work)
            what = "passed through" if level == "-O2" else "taken over, service unreachable"
            rows.append((f"clang-19 {level}", clang, ""))
            rows.append((f"optcc {level} ({what})", optcc, f"+{(optcc[0] - clang[0]) * 1000:.0f} ms"))
        if args.server:
            up = os.environ | {"TMPDIR": scratch, "OPTCC_SERVER": args.server, "OPTCC_CACHE": "0"}
            optcc = timed([str(BIN / "optcc"), "-Oz", *flags], args.runs, up, work)
            rows.append(("optcc -Oz (service up, its time included)", optcc, ""))
            cached = up | {"OPTCC_CACHE": "1", "OPTCC_CACHE_DIR": str(work / "cache")}
            subprocess.run(
                [BIN / "optcc", "-Oz", *flags], env=cached, cwd=work, capture_output=True, check=True
            )
            hit = timed([str(BIN / "optcc"), "-Oz", *flags], args.runs, cached, work)
            clang_oz = next(times for name, times, _ in rows if name == "clang-19 -Oz")
            rows.append(("optcc -Oz (object cache hit)", hit, f"{(hit[0] - clang_oz[0]) * 1000:+.0f} ms"))
    compile_path = import_seconds("import optserve.clients.optcc", args.runs)
    cache_path = import_seconds("import optserve.clients.optcc, optserve.clients.object_cache", args.runs)
    service_path = import_seconds("import optserve.clients.optcc, optserve.clients.python.client", args.runs)
    shown = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
    print(f"unit: {shown}, {args.runs} runs each\n")
    print("| command | median (ms) | fastest (ms) | optcc adds (median) |")
    print("|---|---|---|---|")
    for name, (median, fastest), added in rows:
        print(f"| {name} | {median * 1000:.0f} | {fastest * 1000:.0f} | {added} |")
    print(
        f"\nimports, fastest of {args.runs} (beyond an empty interpreter): compile path "
        f"{compile_path * 1000:.0f} ms, cache hit path {cache_path * 1000:.0f} ms, "
        f"service path (gRPC client) {service_path * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
