"""Run the test folders as `make test` does: one pytest process per folder, `--jobs` of them at a time.

One process per folder keeps a crash in one folder (a killed vLLM engine, a Ray that does not stop) from
taking the others' results with it, and lets the summary name the folders that failed. The service folders
cannot share one Serve app (their settings differ: docs/structure_audit.md), but folders can run at once
(`--jobs 2`): a folder's tests spend much of their time waiting (on its service, subprocesses, polls and
deadlines), so one folder leaves much of two cores idle; on 2 cores tests/serve's latency and deadline
checks fail beside another folder, so `make test` runs them in series. Folders start longest first
(LONGEST_FIRST, from measured times), so that the last ones to start are short. Each folder keeps its own
ports (its conftest's offsets from OPTSERVE_TEST_HTTP_PORT / OPTSERVE_TEST_GRPC_PORT), its own Ray instance
and its own tuning store directory (tests/conftest.py), so no result depends on which folder runs beside
it. A folder's output is printed whole when it ends, then one line per folder: its pytest summary and wall
time.

    python -m optserve.testing.folders [--jobs 2] tests/clients/ tests/compiler/ ...
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Test folders by their wall time alone (longest first; measured with `--durations`, one folder a process);
# a folder not named here starts after these.
LONGEST_FIRST = (
    "serve",
    "reliability",
    "clients",
    "observability",
    "engine",
    "passlm",
    "corpus",
    "kernels",
    "compiler",
    "tuning",
    "looptune_training",
    "policies",
    "contracts",
)
PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]


@dataclass
class Run:
    folder: str
    process: subprocess.Popen
    log: Path
    started: float
    seconds: float = 0.0

    def summary(self) -> str:
        """pytest's last line (counts and time), or the exit status where it printed none."""
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1].strip("= ") if lines else ""
        return last if " in " in last else f"exit status {self.process.returncode}"


def ordered(folders: list[str]) -> list[str]:
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    return sorted(folders, key=lambda folder: (rank.get(Path(folder).name, len(rank)), folder))


def run_folders(folders: list[str], jobs: int) -> list[Run]:
    """Run each folder's pytest, `jobs` at a time; print each folder's output as it ends."""
    waiting = ordered(folders)
    running: list[Run] = []
    done: list[Run] = []
    logs = Path(tempfile.mkdtemp(prefix="optserve-test-folders-"))
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                folder = waiting.pop(0)
                log = logs / f"{Path(folder).name}.log"
                with log.open("w") as out:
                    process = subprocess.Popen(
                        [sys.executable, *PYTEST, folder], stdout=out, stderr=subprocess.STDOUT
                    )
                running.append(Run(folder, process, log, time.monotonic()))
                print(f"-- {folder} started", flush=True)
            time.sleep(0.5)  # polling a handful of processes; each runs for seconds to minutes
            for run in [r for r in running if r.process.poll() is not None]:
                running.remove(run)
                run.seconds = time.monotonic() - run.started
                print(f"== {run.folder} ({run.seconds:.0f} s)", flush=True)
                sys.stdout.write(run.log.read_text(errors="replace"))
                sys.stdout.flush()
                done.append(run)
    finally:
        for run in running:  # interrupted: stop the folders still running (their fixtures stop Ray)
            run.process.terminate()
        for run in running:
            run.process.wait()
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1, help="folders running at once (1: in series)")
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args(argv)
    started = time.monotonic()
    done = run_folders(args.folders, max(1, args.jobs))
    print(f"\ntest folders ({args.jobs} at a time, {time.monotonic() - started:.0f} s in all):")
    width = max(len(run.folder) for run in done)
    for run in sorted(done, key=lambda r: r.folder):
        print(f"  {run.folder:<{width}}  {run.summary()}  ({run.seconds:.0f} s)")
    failed = [run.folder for run in sorted(done, key=lambda r: r.folder) if run.process.returncode != 0]
    if failed:
        print("test folders that failed: " + " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
