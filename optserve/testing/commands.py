"""Wall times for the benchmarks: a command's (optcc against clang, command by command) and a call's."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path


def timed(command: list[str], cwd: Path, env: dict[str, str], before=None) -> float:
    """Wall milliseconds of one run of `command` (after `before()`, untimed); a failure stops the benchmark
    with the command and the end of its diagnostics."""
    if before is not None:
        before()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed:\n{done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def call_seconds(call, warmup: int, repeats: int) -> list[float]:
    """Seconds of each of `repeats` calls of `call()` after `warmup` untimed ones (a kernel's timings)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times
