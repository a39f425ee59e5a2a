"""LLVM's machine outliner on whole units: `.text` against `.eh_frame` and every allocated section.

clang-19 -Oz leaves the machine outliner off on x86-64; `-mllvm -enable-machine-outliner` turns it on. This
compiles the first test units (the same hash order as benchmarks/unit_gap.py) both ways and sums the sizes of
`.text` (+ `.text.*`, the project's objective), `.eh_frame` and all allocated sections but `.bss`.

    python benchmarks/outliner_sections.py --units 40
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

from optserve.passlm.evaluation.held_out_units import sample_units

OUTLINER = ["-mllvm", "-enable-machine-outliner"]
_SECTION = re.compile(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*)")


def sections(ir: str, extra: list[str]) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        source, obj = Path(tmp) / "unit.ll", Path(tmp) / "unit.o"
        source.write_text(ir)
        subprocess.run(
            ["clang-19", "-Oz", "-c", "-x", "ir", str(source), "-o", str(obj), "-w", *extra], check=True
        )
        table = subprocess.run(
            ["readelf", "-SW", str(obj)], check=True, capture_output=True, text=True
        ).stdout
    sizes = {"text": 0, "eh_frame": 0, "allocated": 0}
    for line in table.splitlines():
        match = _SECTION.match(line)
        if not match:
            continue
        name, size, flags = match.group(1), int(match.group(2), 16), match.group(3)
        if name == ".text" or name.startswith(".text."):
            sizes["text"] += size
        if name == ".eh_frame":
            sizes["eh_frame"] += size
        if "A" in flags and not name.startswith(".bss"):
            sizes["allocated"] += size
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("data/real"))
    parser.add_argument("--units", type=int, default=40)
    parser.add_argument("--max-bytes", type=int, default=200_000)
    args = parser.parse_args()
    plain, outlined = {"text": 0, "eh_frame": 0, "allocated": 0}, {"text": 0, "eh_frame": 0, "allocated": 0}
    for unit in sample_units(args.root, args.units, args.max_bytes):
        for totals, extra in ((plain, []), (outlined, OUTLINER)):
            for key, size in sections(unit["ir"], extra).items():
                totals[key] += size
    print(f"{args.units} test units, clang-19 -Oz without / with the machine outliner:")
    for key in plain:
        change = 100 * (outlined[key] - plain[key]) / plain[key]
        print(f"  {key}: {plain[key]:,} B -> {outlined[key]:,} B ({change:+.2f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
