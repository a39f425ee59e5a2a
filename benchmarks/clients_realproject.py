"""optcc on a real project: zlib from its Debian source package, built with its own build system, tested.

    python benchmarks/clients_realproject.py --server 127.0.0.1:29000 [--package zlib] [--out FILE.md]

Needs a running optserve (`optserve serve --config ...`). Four builds of the same source tree, each
`./configure && make && make test`:
  clang-19 -Oz                                  the baseline (CFLAGS=-Oz)
  optcc, objective text_size, IR=oz             (CC=optcc; the default)
  optcc, objective instruction_count, IR=oz
  optcc, objective text_size, IR=o0             (the thesis' -O0 input IR)
and for each: whether the project's tests passed, .text bytes of every object in the static library and of
the shared library, and from optcc's log (OPTCC_LOG) the IR instruction counts the service measured (input,
-Oz, best) per translation unit. The source package comes from the Debian mirror this machine's apt already
uses, through a private deb-src list (nothing under /etc/apt changes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from optserve.config import REPO_ROOT

WORK = REPO_ROOT / "data" / "clients"
APT_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")


def fetch_source(package: str) -> Path:
    """The unpacked Debian source tree of `package` under data/clients/src (fetched once)."""
    source_root = WORK / "src"
    found = sorted(p for p in source_root.glob(f"{package}-*") if p.is_dir()) if source_root.exists() else []
    if found:
        return found[-1]
    uri, suite = _debian_mirror()
    lists = WORK / "apt-lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    source_list = WORK / "src.list"
    source_list.write_text(f"deb-src {uri} {suite} main\n")
    options = [
        f"-oDir::Etc::SourceList={source_list}",
        "-oDir::Etc::SourceParts=/nonexistent",
        f"-oDir::State::Lists={lists}",
    ]
    subprocess.run(["apt-get", *options, "update", "-q"], check=True, capture_output=True)
    source_root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", *options, "source", package], cwd=source_root, check=True, capture_output=True)
    return fetch_source(package)


def _debian_mirror() -> tuple[str, str]:
    """(URI, suite) of the first Debian archive entry in apt's deb822 sources."""
    text = APT_SOURCES.read_text()
    uri = re.search(r"^URIs:\s*(\S+)", text, re.M).group(1)
    suite = re.search(r"^Suites:\s*(\S+)", text, re.M).group(1)
    return uri, suite


def text_bytes(path: Path) -> int:
    """Bytes of code sections (.text, .text.*) in an object, archive or shared library (llvm-size -A)."""
    listing = subprocess.run(["llvm-size-19", "-A", str(path)], capture_output=True, text=True, check=True)
    return sum(
        int(fields[1])
        for fields in (line.split() for line in listing.stdout.splitlines())
        if len(fields) >= 2 and re.fullmatch(r"\.text(\..*)?", fields[0])
    )


def build(source: Path, name: str, env: dict[str, str]) -> dict:
    tree = WORK / "builds" / name.replace(" ", "-").replace("=", "")
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(source, tree, symlinks=True)
    environment = os.environ | {"TMPDIR": str(tree)} | env
    result: dict = {"name": name}
    started = time.monotonic()
    for step in (["./configure"], ["make", "-j2"], ["make", "test"]):
        done = subprocess.run(step, cwd=tree, env=environment, capture_output=True, text=True)
        result[" ".join(step)] = done.returncode
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
            break
        if step == ["make", "test"]:
            result["test_output"] = [line for line in done.stdout.splitlines() if "test OK" in line]
    result["seconds"] = round(time.monotonic() - started, 1)
    result["static_text"] = text_bytes(tree / "libz.a") if (tree / "libz.a").exists() else None
    shared = sorted(tree.glob("libz.so.*.*"))
    result["shared_text"] = text_bytes(shared[-1]) if shared else None
    log = Path(env.get("OPTCC_LOG", "/nonexistent"))
    result["units"] = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result


def summarize_units(units: list[dict]) -> dict:
    served = [u for u in units if u["outcome"] == "service"]
    return {
        "units": len(units),
        "served": len(served),
        "fallbacks": len(units) - len(served),
        "model_candidates_used": sum(1 for u in served if u["passes"] != ["-Oz"]),
        "over_context": sum(1 for u in served if "-Oz only" in u["warning"]),
        "input_cost": sum(u["input_cost"] for u in served),
        "oz_cost": sum(u["oz_cost"] for u in served),
        "cost": sum(u["cost"] for u in served),
        "seconds": round(sum(u["seconds"] for u in served), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", required=True, help="host:port of a running optserve's gRPC API")
    parser.add_argument("--package", default="zlib")
    parser.add_argument("--strategy", default="greedy")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--out", type=Path, help="write the markdown section here")
    args = parser.parse_args()

    from optserve.serve.client import OptserveClient

    with OptserveClient(args.server) as client:
        model = client.model_metadata()
    source = fetch_source(args.package)
    optcc = str(Path(sys.executable).with_name("optcc"))
    optcc_env = {
        "CC": optcc,
        "CFLAGS": "-Oz",  # optcc takes over size builds only; zlib's own default is -O3
        "OPTCC_SERVER": args.server,
        "OPTCC_STRATEGY": args.strategy,
        "OPTCC_SAMPLES": str(args.samples),
        "OPTCC_DEADLINE": str(args.deadline),
    }
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    builds = [build(source, "clang-Oz", {"CC": "clang-19", "CFLAGS": "-Oz"})]
    for objective, ir_mode in (("text_size", "oz"), ("instruction_count", "oz"), ("text_size", "o0")):
        name = f"optcc {objective} IR={ir_mode}"
        log = logs / f"optcc-{objective}-{ir_mode}.jsonl"
        log.unlink(missing_ok=True)
        env = optcc_env | {"OPTCC_OBJECTIVE": objective, "OPTCC_IR": ir_mode, "OPTCC_LOG": str(log)}
        builds.append(build(source, name, env))
    for result in builds:
        result["summary"] = summarize_units(result.pop("units"))
        print(json.dumps(result))
    section = render(args, source, model, builds)
    print(section)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(section)
    return 0 if all(b.get("make test") == 0 for b in builds) else 1


def render(args, source: Path, model, builds: list[dict]) -> str:
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"## optcc on a real project: {source.name} (Debian source package)",
        "",
        f"Date: {date}. Machine: {os.cpu_count()} CPU cores, shared with other work (timings are noisy).",
        f"Command: `python benchmarks/clients_realproject.py --server {args.server} --package {args.package} "
        f"--strategy {args.strategy} --samples {args.samples} --deadline {args.deadline}`",
        f"Service model: `{model.name}` version `{model.version}` on the {model.backend} backend "
        f"(ready: {model.ready}).",
        "",
        "| build | configure | make | make test | .text libz.a (B) | .text libz.so (B) | wall (s) |",
        "|---|---|---|---|---|---|---|",
    ]

    def status(code) -> str:
        return "-" if code is None else ("ok" if code == 0 else f"failed ({code})")

    for b in builds:
        lines.append(
            f"| {b['name']} | {status(b.get('./configure'))} | {status(b.get('make -j2'))} | "
            f"{status(b.get('make test'))} | {b['static_text']} | {b['shared_text']} | {b['seconds']} |"
        )
    lines += [
        "",
        "Per translation unit, as the service measured it (LLVM 20 via llvmlite; units compiled twice by "
        "zlib's Makefile, static and PIC, count twice; configure's probes included):",
        "",
        "| optcc build | units | served | fallbacks | model list chosen | over model context | input cost | "
        "-Oz cost | best cost | service time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in builds[1:]:
        s = b["summary"]
        lines.append(
            f"| {b['name']} | {s['units']} | {s['served']} | {s['fallbacks']} | "
            f"{s['model_candidates_used']} | {s['over_context']} | {s['input_cost']} | {s['oz_cost']} | "
            f"{s['cost']} | {s['seconds']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
