"""Labelling: autotuner labels per objective, the broadcast step, and resuming a killed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from optserve.compiler.passes import validate_pass_list
from optserve.compiler.pipeline import evaluate, oz_cost
from optserve.corpus.journal import Journal, read_jsonl
from optserve.corpus.label import LabelConfig, autotune_function, broadcast_function, broadcast_lists, label
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.parallel import ProcessRunner


def _examples(corpus):
    layout = CorpusLayout(corpus)
    return [e for shard in layout.shards() for e in read_jsonl(shard)]


def _largest(corpus):
    return max(_examples(corpus), key=lambda e: e["instructions"])


def test_autotune_labels_both_objectives_reproducibly(built_corpus):
    example = _largest(built_corpus)
    record = autotune_function((example, LabelConfig(budget=40)))
    assert record["key"] == example["id"] and record["split"] == example["split"]
    for objective in ("instruction_count", "text_size"):
        label_ = record[objective]
        assert label_["oz"] == oz_cost(example["ir"], objective)
        assert label_["best"] <= label_["oz"]
        assert label_["compilations"] >= 40
        pass_list = validate_pass_list(label_["pass_list"])
        assert evaluate(example["ir"], pass_list, objective).cost == label_["best"]


def test_broadcast_lists_are_unique_improving_lists_most_frequent_first():
    def tuned(pass_list, best, oz=10):
        return {"instruction_count": {"pass_list": pass_list, "best": best, "oz": oz}}

    records = [
        tuned(["-Oz"], 10),
        tuned(["-O2", "instcombine"], 8),
        tuned(["sroa"], 9),
        tuned(["-O2", "instcombine"], 9),
        tuned(["dce"], 10),  # no better than -Oz: not a broadcast list
        {"error": "crash"},
    ]
    lists = broadcast_lists(records, ("instruction_count",))
    assert lists == {"instruction_count": [["-O2", "instcombine"], ["sroa"]]}
    assert broadcast_lists(records, ("instruction_count",), limit=1) == {
        "instruction_count": [["-O2", "instcombine"]]
    }


def test_broadcast_keeps_a_strictly_better_list_from_another_function(built_corpus):
    example = _largest(built_corpus)
    unoptimized = evaluate(example["ir"], (), "instruction_count").cost
    # Pretend the autotuner found nothing (no passes); the broadcast lists hold real improvements.
    tuned = {"instruction_count": {"oz": unoptimized, "best": unoptimized, "pass_list": []}}
    lists = {"instruction_count": [["dce"], ["-O1"], ["-Oz"]]}
    record = broadcast_function((example, tuned, lists, LabelConfig(objectives=("instruction_count",))))
    costs = {
        tuple(p): evaluate(example["ir"], p, "instruction_count").cost for p in lists["instruction_count"]
    }
    label_ = record["instruction_count"]
    assert label_["from"] == "broadcast" and label_["compilations"] == 3
    assert label_["best"] == min(costs.values()) < unoptimized
    assert costs[tuple(label_["pass_list"])] == label_["best"]


def test_time_limit_stops_early_and_a_rerun_finishes_without_repeats(built_corpus):
    layout = CorpusLayout(built_corpus)
    config = LabelConfig(budget=20, objectives=("instruction_count",))
    total = len(_examples(built_corpus))
    first = label(
        layout, layout.shards(), "autotune", config, ProcessRunner(2), time_limit_s=0.01, progress=False
    )
    assert first.stopped_early and 0 < first.functions < total
    second = label(layout, layout.shards(), "autotune", config, ProcessRunner(2), progress=False)
    assert second.skipped == first.functions and second.functions == total - first.functions
    labelled = [
        r["key"] for shard in layout.shards() for r in read_jsonl(layout.label_path("autotune", shard))
    ]
    assert sorted(labelled) == sorted(e["id"] for e in _examples(built_corpus))


def _journaled(layout):
    """Every record finished so far: journals of open shards plus label files of finished ones
    (a finished shard's journal is folded into its label file and removed)."""
    finished = {}
    for shard in layout.shards():
        path = layout.label_path("autotune", shard)
        if path.exists():
            finished.update({r["key"]: r for r in read_jsonl(path)})
        finished.update(Journal(layout.label_journal("autotune", shard)).records())
    return finished


@pytest.mark.slow  # ~15 s idle, longer on a busy machine
def test_killed_labelling_run_resumes_without_losing_or_repeating_work(built_corpus):
    layout = CorpusLayout(built_corpus)
    command = [sys.executable, "-m", "optserve.corpus.cli", "label", "--corpus", str(built_corpus),
               "--stage", "autotune", "--objectives", "instruction_count", "--budget", "150",
               "--candidate-timeout", "20", "--workers", "2", "--quiet", "--json"]  # fmt: skip
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while len(_journaled(layout)) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run finished before it could be killed; raise the budget"
    os.killpg(process.pid, signal.SIGKILL)  # the driver and all its workers, mid-run
    process.wait()

    before = _journaled(layout)  # (also cuts off a record torn by the kill)
    total = len(_examples(built_corpus))
    assert 3 <= len(before) < total

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    stage = json.loads(resumed.stdout)["stages"][0]
    assert stage["skipped"] == len(before)  # nothing finished was redone
    assert stage["functions"] == total - len(before)  # nothing unfinished was lost

    final = [r for shard in layout.shards() for r in read_jsonl(layout.label_path("autotune", shard))]
    assert sorted(r["key"] for r in final) == sorted(e["id"] for e in _examples(built_corpus))
    by_key = {r["key"]: r for r in final}
    assert all(by_key[key] == record for key, record in before.items())  # same records, timings included
    assert not any(layout.label_journal("autotune", shard).exists() for shard in layout.shards())


def test_unknown_stage_is_refused(built_corpus):
    layout = CorpusLayout(built_corpus)
    with pytest.raises(ValueError, match="unknown stage"):
        label(layout, layout.shards(), "nonsense", LabelConfig(), ProcessRunner(1), progress=False)


def test_measure_stage_records_each_seed_lists_cost_and_folds_them_into_the_labels(built_corpus):
    from optserve.corpus.coreset import known_costs
    from optserve.corpus.label import searched_labels, seeds_fingerprint

    layout = CorpusLayout(built_corpus)
    seeds = (("sroa",), ("-O1", "dse"), ("instcombine", "simplifycfg"))
    config = LabelConfig(budget=10, objectives=("text_size",), seeds=seeds)
    label(layout, layout.shards(), "autotune", config, ProcessRunner(2), progress=False)
    first = label(layout, layout.shards(), "measure", config, ProcessRunner(2), progress=False)
    total = len(_examples(built_corpus))
    assert first.functions == total and first.compilations == total * (len(seeds) + 1)
    fingerprint = seeds_fingerprint(seeds)
    labels = searched_labels(layout, layout.shards())
    for example in _examples(built_corpus):
        label_ = labels[example["id"]]["text_size"]
        costs = [evaluate(example["ir"], s, "text_size").cost for s in seeds]
        assert label_["measured"] == {fingerprint: costs}
        known = known_costs(label_, {fingerprint: [list(s) for s in seeds]})
        assert all(known[s] <= cost for s, cost in zip(seeds, costs, strict=True))
    again = label(layout, layout.shards(), "measure", config, ProcessRunner(2), progress=False)
    assert again.functions == 0 and again.skipped == total
    other = LabelConfig(budget=10, objectives=("text_size",), seeds=seeds[:1])  # another coreset: anew
    redone = label(layout, layout.shards(), "measure", other, ProcessRunner(2), progress=False)
    assert redone.functions == total


def test_measure_stage_needs_seed_lists(built_corpus):
    layout = CorpusLayout(built_corpus)
    with pytest.raises(ValueError, match="needs the lists"):
        label(layout, layout.shards(), "measure", LabelConfig(), ProcessRunner(1), progress=False)


def test_a_bundle_carries_the_label_files_asked_for(built_corpus, tmp_path):
    import tarfile

    from optserve.corpus.remote import make_bundle

    layout = CorpusLayout(built_corpus)
    config = LabelConfig(budget=5, objectives=("text_size",), seeds=(("sroa",),))
    label(layout, layout.shards(), "measure", config, ProcessRunner(2), progress=False)
    (layout.labels_dir / "local" / "seeds").mkdir(parents=True)
    (layout.labels_dir / "local" / "seeds" / "abc.json").write_text("[]\n")
    shard, *others = layout.shards()
    assert others, "the fixture corpus has several shards"

    def packed(labels):
        out = tmp_path / f"{labels}.tar.xz"
        make_bundle(layout, [shard], out, labels)
        with tarfile.open(out) as tar:
            return {name for name in tar.getnames() if name.startswith("labels/")}

    everything = packed("all")
    assert {f"labels/measure/{s.name}" for s in layout.shards()} <= everything
    assert packed("own") == {f"labels/measure/{shard.name}", "labels/local/seeds/abc.json"}
    assert packed("none") == set()
    # A package name with a dot (libpng1.6): its shard's finished labels and journal are its own.
    dotted = shard.with_name("val-libpng1.6-000.jsonl")
    dotted.write_bytes(shard.read_bytes())
    for name in (dotted.name, "val-libpng1.6-000.journal.jsonl"):
        (layout.labels_dir / "measure" / name).write_text("")
    out = tmp_path / "dotted.tar.xz"
    make_bundle(layout, [dotted], out, "own")
    with tarfile.open(out) as tar:
        assert {n for n in tar.getnames() if n.startswith("labels/measure/")} == {
            "labels/measure/val-libpng1.6-000.jsonl",
            "labels/measure/val-libpng1.6-000.journal.jsonl",
        }
    with pytest.raises(ValueError, match="labels must be one of"):
        make_bundle(layout, [shard], tmp_path / "x.tar.xz", "some")
