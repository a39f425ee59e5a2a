"""What benchmarks/reliability_*.py share: the machine's description and writing one section of
docs/bench/reliability.md (each benchmark owns the text between its markers)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

from optserve.config import REPO_ROOT as REPO

REPORT = REPO / "docs" / "bench" / "reliability.md"
HEADER = (
    "# Reliability figures (issue 10)\n\nWritten by benchmarks/reliability_*.py; each owns its section.\n"
)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} CPUs visible, Python {platform.python_version()}"


def utc_now() -> str:
    return subprocess.run(["date", "-u"], capture_output=True, text=True, check=True).stdout.strip()


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section `name` of docs/bench/reliability.md."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    text = REPORT.read_text() if REPORT.exists() else HEADER
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    section = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + section + "\n"
    )
    REPORT.write_text(text)
