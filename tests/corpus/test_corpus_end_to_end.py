"""The documented commands end to end on the fixtures: build, label (autotune + broadcast), card, leakage."""

from __future__ import annotations

import json

import pytest

from optserve.cli import main
from optserve.corpus.journal import read_jsonl
from optserve.corpus.label import iter_labelled
from optserve.corpus.layout import CorpusLayout
from optserve.corpus.split import SPLITS


@pytest.mark.slow  # ~25 s: two objectives, two stages, 22 functions
def test_build_label_card_and_leakage_check(fixture_data_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    build = ["dataset", "build", "--data-dir", str(fixture_data_dir), "--corpus", str(corpus),
             "--sources", "gcc-torture,gcc-dg,llvm-transforms", "--val-percent", "20", "--test-percent", "20",
             "--shard-size", "5", "--workers", "2", "--json"]  # fmt: skip
    assert main(build) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["total"] == sum(built["splits"].values()) >= 15
    assert all(built["splits"][split] > 0 for split in SPLITS)

    label = ["dataset", "label", "--corpus", str(corpus), "--budget", "20", "--workers", "2", "--json"]
    assert main(label) == 0
    stages = {s["stage"]: s for s in json.loads(capsys.readouterr().out)["stages"]}
    assert stages["autotune"]["functions"] == built["total"] and stages["autotune"]["failed"] == 0
    assert stages["broadcast"]["functions"] == built["total"]

    layout = CorpusLayout(corpus)
    labelled = list(iter_labelled(layout, SPLITS))
    assert len(labelled) == built["total"]
    for example in labelled:
        for objective in ("instruction_count", "text_size"):
            label_ = example["labels"][objective]
            assert label_["best"] <= label_["autotune"] <= label_["oz"]
            assert label_["compilations"] >= 20
    for split in SPLITS:
        assert (layout.labels_dir / "broadcast" / f"lists-{split}.json").exists()

    assert main(["dataset", "card", "--corpus", str(corpus), "--json"]) == 0
    numbers = json.loads(capsys.readouterr().out)
    assert numbers["split_totals"]["total"] == built["total"]
    assert numbers["labels"]["instruction_count"]["groups"]["all"]["functions"] == built["total"]
    card = layout.card.read_text()
    assert "## Counts per source and split" in card and "plain -Oz %" in card and "gcc-torture" in card

    # Leakage: a training function is caught (exit 1); held-out functions are not in training.
    manifest = [line.split("\t") for line in layout.manifest.read_text().splitlines()[1:]]
    train_row = next(row for row in manifest if row[1] == "train")
    train_file = layout.function_file(train_row[2], "train", train_row[0])
    held_out = [layout.function_file(row[2], row[1], row[0]) for row in manifest if row[1] != "train"]
    assert main(["dataset", "check-leakage", "--corpus", str(corpus), *map(str, held_out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["clean"]
    assert main(["dataset", "check-leakage", "--corpus", str(corpus), str(train_file), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["found_in_split"] == [str(train_file)]

    # Labelling again finds everything done.
    assert main(label) == 0
    again = json.loads(capsys.readouterr().out)["stages"]
    assert again[0]["functions"] == 0 and again[0]["skipped"] == built["total"]
    assert (
        sum(1 for shard in layout.shards() for _ in read_jsonl(layout.label_path("autotune", shard)))
        == built["total"]
    )
