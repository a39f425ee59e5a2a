"""Labelling throughput: autotune a sample of corpus functions with the real budget, count CPU time.

Picks `--sample` training functions round-robin over sources (in id order, a fixed shuffle), labels them in a
scratch copy with `optserve.corpus.label` (both objectives, budget 1000, local process pool), and measures:
wall time, compilations, and the CPU seconds of every process the run used (read from /proc while it runs,
so a busy shared machine does not distort the per-compilation cost). Writes runs/bench/corpus_label.json;
benchmarks/corpus_report.py turns it and the corpus build stats into docs/bench/corpus.md.

    nice -n 10 python benchmarks/corpus_label_throughput.py --corpus data/corpus --sample 100
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from optserve.corpus.journal import read_jsonl, write_jsonl_atomic
from optserve.corpus.label import LabelConfig, label, read_labels
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.parallel import ProcessRunner

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class DescendantCPU:
    """Samples /proc for the CPU time of this process's descendants (max seen per pid: exited ones count)."""

    def __init__(self, interval_s: float = 0.25):
        self.interval_s = interval_s
        self.cpu_by_pid: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DescendantCPU:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.cpu_by_pid.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)
        self._sample()

    def _sample(self) -> None:
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            parents[int(entry)] = int(fields[1])
            cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        me = os.getpid()
        for pid in cpu:
            ancestor, hops = parents.get(pid), 0
            while ancestor not in (None, 0, 1, me) and hops < 16:
                ancestor, hops = parents.get(ancestor), hops + 1
            if ancestor == me:
                self.cpu_by_pid[pid] = max(self.cpu_by_pid.get(pid, 0.0), cpu[pid])


def stratified_sample(layout: CorpusLayout, size: int) -> list[dict]:
    by_source: dict[str, list[dict]] = defaultdict(list)
    for shard in layout.shards(("train",)):
        for example in read_jsonl(shard):
            by_source[example["source"]].append(example)
    sample: list[dict] = []
    queues = [list(v) for _, v in sorted(by_source.items())]
    while len(sample) < size and any(queues):
        for queue in queues:
            if queue and len(sample) < size:
                sample.append(queue.pop(0))
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus"))
    parser.add_argument("--sample", type=int, default=100)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path, default=Path("runs/bench/corpus_label.json"))
    args = parser.parse_args()

    sample = stratified_sample(CorpusLayout(args.corpus), args.sample)
    with tempfile.TemporaryDirectory() as scratch:
        layout = CorpusLayout(Path(scratch))
        write_jsonl_atomic(layout.shard_path("train", 0), sample)
        config = LabelConfig(budget=args.budget)
        started = time.monotonic()
        with DescendantCPU() as cpu:
            summary = label(
                layout, layout.shards(), "autotune", config, ProcessRunner(args.workers), progress=True
            )
        wall = time.monotonic() - started
        labels = read_labels(layout, "autotune")

    per_source: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_objective: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for example in sample:
        record = labels[example["id"]]
        s = per_source[example["source"]]
        s["functions"] += 1
        s["instructions"] += example["instructions"]
        for objective in config.objectives:
            if objective in record:
                s["compilations"] += record[objective]["compilations"]
                s["function_seconds"] += record[objective]["seconds"]
                o = per_objective[objective]
                o["compilations"] += record[objective]["compilations"]
                o["function_seconds"] += record[objective]["seconds"]
                o["improved"] += record[objective]["best"] < record[objective]["oz"]
                o["oz"] += record[objective]["oz"]
                o["best"] += record[objective]["best"]
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, {platform.machine()})",
        "load_average_at_end": os.getloadavg(),
        "command": f"nice -n 10 python benchmarks/corpus_label_throughput.py --corpus {args.corpus} "
        f"--sample {args.sample} --budget {args.budget} --workers {args.workers}",
        "sample": len(sample),
        "budget": args.budget,
        "workers": args.workers,
        "failed": summary.failed,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu.seconds, 1),
        "compilations": summary.compilations,
        "compilations_per_wall_s": round(summary.compilations / wall, 1),
        "cpu_ms_per_compilation": round(1000 * cpu.seconds / summary.compilations, 3),
        "per_source": {k: dict(v) for k, v in sorted(per_source.items())},
        "per_objective": {k: dict(v) for k, v in per_objective.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("per_source",)}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
