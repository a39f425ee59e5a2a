"""Valid IR that takes the compiler seconds: inputs with which a deadline cuts real compiles.

The serve and reliability tests (through optserve/testing/service.py, which checks them against the test
service's size limit) and benchmarks/serve_deadline.py use the same two modules.
"""

from __future__ import annotations

import random
import subprocess


def slow_module() -> str:
    """1,200 synthetic functions in one module (1.2 MB) that -Oz needs about two seconds for."""
    from optserve.passlm.tiny_model import synthetic_function

    rng = random.Random(0)
    return "\n".join(synthetic_function(rng, f"f{i}") for i in range(1200))


def slow_candidates_module(loops: int = 600) -> str:
    """One C function of `loops` loops as -O0 IR (1.3 MB at 600). Its candidates compile for seconds each
    (-Oz ~15 s, -O3 and -O2 ~5 s here, 2 shared cores), where slow_module's take 1-3 s: a deadline cuts
    them mid-compile with seconds of work left."""
    lines = ["float heavy(float *a, float *b, int n) {", "  float s = 0;"]
    lines += [
        f"  for (int i = 0; i < n; i++) {{ a[i] = a[i] * {k + 1}.5f + b[(i * {k % 7 + 1}) % n];"
        f" s += a[i] / (b[i] + {k}.0f); }}"
        for k in range(loops)
    ]
    source = "\n".join([*lines, "  return s;", "}"]) + "\n"
    command = [
        "clang-19",
        "-O0",
        "-Xclang",
        "-disable-O0-optnone",
        "-emit-llvm",
        "-S",
        "-w",
        "-x",
        "c",
        "-o",
        "-",
        "-",
    ]
    return subprocess.run(command, input=source, capture_output=True, text=True, check=True).stdout
