"""The request mix the load tests send, prepared once before locust starts (its own process: locust must not
share a process with LLVM, torch or Ray).

IR: per-function modules of the corpus's test split (data/corpus/examples/test-*.jsonl) when it has been
built (and --c-programs is not given), otherwise the C programs in tests/data/c compiled with clang-19 and
split per function. Loop nests: matrix multiplications with sizes in the LoopTune dataset's range
(64..256, step 16).

    python -m loadtests.workload OUT.jsonl   (run from the repository root; run_headless.py calls it)
    python -m loadtests.workload loadtests/default_workload.jsonl --c-programs   # the locustfile's default
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
from pathlib import Path

from optserve.config import REPO_ROOT

CORPUS_EXAMPLES = REPO_ROOT / "data" / "corpus" / "examples"
C_PROGRAMS = REPO_ROOT / "tests" / "data" / "c"
MATMUL = "C[m,n] += A[m,k] * B[k,n]"
LOOP_NESTS = 16


def test_split_functions(limit: int, seed: int, c_programs: bool = False) -> tuple[str, list[str]]:
    """(where they came from, IR modules): up to `limit` functions, a seeded sample."""
    shards = [] if c_programs else sorted(CORPUS_EXAMPLES.glob("test-*.jsonl"))
    if shards:
        modules = [json.loads(line)["ir"] for shard in shards for line in shard.read_text().splitlines()]
        source = f"corpus test split ({len(modules)} functions in {CORPUS_EXAMPLES})"
    else:
        modules = _c_program_functions()
        source = f"tests/data/c compiled per function ({len(modules)} functions)"
    random.Random(seed).shuffle(modules)
    return source, modules[:limit]


def _c_program_functions() -> list[str]:
    from optserve.compiler.ir import split_functions

    modules = []
    with tempfile.TemporaryDirectory() as scratch:
        for program in sorted(C_PROGRAMS.glob("*.c")):
            output = Path(scratch) / (program.stem + ".ll")
            command = ["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-S", "-w"]
            # From its folder: the module's source_filename is then the file's name, not this checkout's path.
            subprocess.run([*command, program.name, "-o", str(output)], check=True, cwd=C_PROGRAMS)
            modules += [module for _, module in split_functions(output.read_text())]
    return modules


def loop_nests(seed: int) -> list[dict]:
    rng = random.Random(seed)
    sizes = range(64, 257, 16)
    return [
        {"einsum": MATMUL, "sizes": {"m": rng.choice(sizes), "k": rng.choice(sizes), "n": rng.choice(sizes)}}
        for _ in range(LOOP_NESTS)
    ]


def write_workload(path: Path, limit: int = 300, seed: int = 0, c_programs: bool = False) -> str:
    """Write the mix as JSON lines ({"ir": ...} or {"einsum": ..., "sizes": ...}); return its description."""
    source, modules = test_split_functions(limit, seed, c_programs)
    nests = loop_nests(seed)
    with path.open("w") as out:
        for module in modules:
            out.write(json.dumps({"ir": module}) + "\n")
        for nest in nests:
            out.write(json.dumps(nest) + "\n")
    return f"IR: {len(modules)} functions from the {source}; loop nests: {len(nests)} matmuls {MATMUL}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--c-programs", action="store_true", help="tests/data/c even if the corpus is built")
    arguments = parser.parse_args()
    print(write_workload(arguments.out, arguments.limit, arguments.seed, arguments.c_programs))
