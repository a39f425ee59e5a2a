"""The real-code corpus end to end on a miniature: optcc captures two 'packages', both corpora are built,
labelled by local search, exported to the committed label store, and restored into a rebuilt corpus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from optserve.corpus.journal import Journal, read_jsonl
from optserve.corpus.label import LabelConfig, label, read_labels
from optserve.corpus.label_store import MANIFEST, export, restore, stored_labels
from optserve.corpus.parallel import ProcessRunner
from optserve.corpus.real_corpus import RealCorpusLayout, assemble, is_probe, package_split, process_package
from optserve.corpus.real_packages import PACKAGES, CaptureLayout
from optserve.corpus.real_stats import corpus_stats, write_card

C_FILES = Path(__file__).resolve().parent.parent / "data" / "c"
OPTCC = Path(sys.executable).with_name("optcc")
TEST_PACKAGE = next(p for p in PACKAGES if package_split(p) == "test")
TRAIN_PACKAGE = next(p for p in PACKAGES if package_split(p) == "train")


def test_split_is_by_package_deterministic_and_holds_out_every_kind():
    splits = {p: package_split(p) for p in PACKAGES}
    assert splits == {p: package_split(p) for p in PACKAGES}
    for kind in set(PACKAGES.values()):
        in_kind = [splits[p] for p, k in PACKAGES.items() if k == kind]
        assert in_kind.count("test") == 1 and in_kind.count("val") <= 1


# The held-out packages that labels, the coreset and the benchmarks were built on. A package added to
# PACKAGES must rank after its kind's val package (corpus/real_corpus.py `_package_rank`), else it moves
# these and the committed labels of the moved packages change split.
HELD_OUT = {
    "test": ["duktape", "gdbm", "libtommath", "libuv1", "mxml", "nettle", "opus", "pcre2", "sed", "xz-utils"],
    "val": [
        "bc",
        "cjson",
        "diffutils",
        "gsl",
        "libevent",
        "libonig",
        "libpng1.6",
        "libsodium",
        "sqlite3",
        "zstd",
    ],
}


def test_adding_packages_leaves_the_held_out_packages_where_they_were():
    for split, packages in HELD_OUT.items():
        assert sorted(p for p in PACKAGES if package_split(p) == split) == packages


def test_configure_and_cmake_probes_are_not_package_code():
    assert is_probe("/src/pkg/conftest.c")
    assert is_probe("/src/pkg/build/CMakeFiles/CMakeScratch/TryCompile-1/src.c")
    assert not is_probe("/src/pkg/lib/compress.c")


def _capture(root: Path, package: str, files: list[str]) -> None:
    """A package's build seen through optcc's capture mode, as real_packages.py runs it."""
    layout = CaptureLayout(root)
    source_dir = layout.sources / package / f"{package}-1.0"
    source_dir.mkdir(parents=True)
    for name in files:
        shutil.copy(C_FILES / name, source_dir / name)
        env = os.environ | {"OPTCC_CAPTURE": str(layout.capture_dir(package)), "OPTCC_CAPTURE_TAG": package}
        subprocess.run(
            [str(OPTCC), "-Oz", "-g", "-c", name, "-o", name + ".o"], cwd=source_dir, env=env, check=True
        )
    status = layout.status_file(package)
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(
        json.dumps({"package": package, "kind": PACKAGES[package], "ok": True, "units": len(files)})
    )


@pytest.fixture(scope="module")
def real_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real")
    _capture(root, TEST_PACKAGE, ["loops.c", "recursion.c"])
    _capture(root, TRAIN_PACKAGE, ["loops.c", "globals.c"])  # loops.c again: the same unit in two splits
    layout = RealCorpusLayout(root)
    runner = ProcessRunner(1)
    for package in (TEST_PACKAGE, TRAIN_PACKAGE):
        process_package(layout, package, runner)
    assemble(layout, [TEST_PACKAGE, TRAIN_PACKAGE])
    return root


def _examples(root: Path, granularity: str) -> list[dict]:
    corpus = RealCorpusLayout(root).corpus(granularity)
    return [e for shard in corpus.shards() for e in read_jsonl(shard)]


def test_units_and_functions_are_split_by_package_and_a_shared_unit_stays_held_out(real_root):
    units = _examples(real_root, "units")
    assert {(u["package"], u["file"], u["split"]) for u in units} == {
        (TEST_PACKAGE, "loops.c", "test"),
        (TEST_PACKAGE, "recursion.c", "test"),
        (TRAIN_PACKAGE, "globals.c", "train"),
    }
    assert all("llvm.dbg" not in u["ir"] and "!DI" not in u["ir"] for u in units)  # -g stripped
    assert all("optsize" in u["ir"] for u in units)  # attributes kept: the -Oz IR optcc sends
    functions = _examples(real_root, "functions")
    assert functions and all(f["function"] and f["split"] == package_split(f["package"]) for f in functions)
    ids = [f["id"] for f in functions]
    assert len(ids) == len(set(ids))
    manifest = (RealCorpusLayout(real_root).corpus("functions").manifest).read_text().splitlines()
    assert len(manifest) == len(functions) + 1


def test_labels_persist_through_the_store_into_a_rebuilt_corpus(real_root, tmp_path):
    root = tmp_path / "real"
    shutil.copytree(real_root, root)
    corpus = RealCorpusLayout(root).corpus("functions")
    config = LabelConfig(budget=12, objectives=("text_size",), seeds=(("-Os",), ("-O2",)))
    runner = ProcessRunner(1)
    summary = label(corpus, corpus.shards(), "local", config, runner, progress=False, log=lambda _: None)
    assert summary.functions == len(_examples(root, "functions")) and summary.failed == 0
    labels = read_labels(corpus, "local")
    some = next(iter(labels.values()))["text_size"]
    assert some["search"] == "ls1" and some["budget"] == 12 and len(some["seed_costs"]) == 2
    assert some["best"] <= some["oz"]

    store = tmp_path / "labels"
    assert export(corpus, "functions", store) == {"text_size": len(labels)}
    manifest = json.loads((store / MANIFEST).read_text())
    assert sum(f["records"] for f in manifest["files"].values()) == len(labels)
    assert set(stored_labels(store, "functions")["text_size"]) == set(labels)

    stats = corpus_stats(root, store)
    functions = stats["functions"]
    assert sum(functions["examples"].values()) == len(labels) and stats["packages"]["captured"] == 2
    labelled = functions["labels"]["text_size"]
    assert sum(split["labelled"] for split in labelled.values()) == len(labels)
    assert all(split["budgets"] == {"12": split["labelled"]} for split in labelled.values())
    write_card(root, stats, tmp_path / "card.md")
    card = (tmp_path / "card.md").read_text()
    assert (
        TEST_PACKAGE in card and TRAIN_PACKAGE in card and "python -m optserve.corpus.real_packages" in card
    )

    shutil.rmtree(corpus.labels_dir)  # a fresh session: corpus rebuilt, labels only in the store
    assert restore(corpus, "functions", store, ("text_size",)) == len(labels)
    again = label(corpus, corpus.shards(), "local", config, runner, progress=False, log=lambda _: None)
    assert again.functions == 0 and again.skipped == len(labels)
    assert {k: r["text_size"] for k, r in read_labels(corpus, "local").items()} == {
        k: r["text_size"] for k, r in labels.items()
    }

    # A journal that holds an example's other objective only gets the stored one added, the other kept.
    shutil.rmtree(corpus.labels_dir)
    key, shard = next(iter(labels)), corpus.shards()[0]
    with Journal(corpus.label_journal("local", shard)) as journal:
        journal.append({"key": key, "split": "x", "source": "y", "instruction_count": {"best": 1}})
    assert restore(corpus, "functions", store, ("text_size",)) == len(labels)
    merged = read_labels(corpus, "local")[key]
    assert merged["instruction_count"] == {"best": 1} and merged["text_size"] == labels[key]["text_size"]

    # A finished file with both objectives beside a journal that holds one of them (the first search's
    # records, restored, while a second search ran): the journal's record adds, it does not erase the other.
    shutil.rmtree(corpus.labels_dir)
    final = corpus.label_path("local", shard)
    final.parent.mkdir(parents=True)
    counted = {**labels[key]["text_size"], "best": 2}  # any record of the other objective
    both = {"key": key, "text_size": labels[key]["text_size"], "instruction_count": counted}
    final.write_text(json.dumps(both) + "\n")
    with Journal(corpus.label_journal("local", shard)) as journal:
        journal.append({"key": key, "text_size": labels[key]["text_size"]})
    assert read_labels(corpus, "local")[key] == both
    assert export(corpus, "functions", tmp_path / "both")["instruction_count"] == 1


def test_a_second_objective_labels_every_example_again_and_keeps_the_first(real_root, tmp_path):
    root = tmp_path / "real"
    shutil.copytree(real_root, root)
    corpus = RealCorpusLayout(root).corpus("functions")
    runner = ProcessRunner(1)
    quiet = {"progress": False, "log": lambda _: None}
    first = LabelConfig(budget=6, objectives=("text_size",))
    label(corpus, corpus.shards(), "local", first, runner, **quiet)
    second = LabelConfig(budget=6, objectives=("instruction_count",))
    summary = label(corpus, corpus.shards(), "local", second, runner, **quiet)
    assert summary.functions == len(_examples(root, "functions"))
    labels = read_labels(corpus, "local")
    assert all("text_size" in r and "instruction_count" in r for r in labels.values())

    # A finished file with one objective beside a journal holding the other for one example (labels of a
    # lent call unpacked beside it): that example is done, only the others are searched again.
    shutil.rmtree(corpus.labels_dir)
    label(corpus, corpus.shards(), "local", first, runner, **quiet)
    shard = corpus.shards()[0]
    key = next(read_jsonl(corpus.label_path("local", shard)))["key"]
    with Journal(corpus.label_journal("local", shard)) as journal:
        journal.append({"key": key, "instruction_count": labels[key]["instruction_count"]})
    both = LabelConfig(budget=6, objectives=("text_size", "instruction_count"))
    again = label(corpus, corpus.shards(), "local", both, runner, **quiet)
    assert again.functions == len(_examples(root, "functions")) - 1
    assert read_labels(corpus, "local")[key]["instruction_count"] == labels[key]["instruction_count"]


def test_the_cli_keeps_the_seed_set_and_the_coreset_is_built_from_the_store(real_root, tmp_path):
    from optserve.corpus.cli import main as dataset_main
    from optserve.corpus.coreset import build_coreset
    from optserve.corpus.label import seeds_fingerprint
    from optserve.corpus.label_store import seed_sets

    root = tmp_path / "real"
    shutil.copytree(real_root, root)
    seeds = tmp_path / "seeds.json"
    seeds.write_text(json.dumps([["-Os"], ["-O2", "mergefunc"]]))
    corpus = RealCorpusLayout(root).corpus("functions")
    arguments = ["label", "--corpus", str(corpus.root), "--stage", "local", "--seeds", str(seeds),
                 "--budget", "8", "--objectives", "text_size", "--workers", "1", "--json"]  # fmt: skip
    assert dataset_main(arguments) == 0
    store = tmp_path / "labels"
    export(corpus, "functions", store)
    fingerprint = seeds_fingerprint([["-Os"], ["-O2", "mergefunc"]])
    assert seed_sets(store) == {fingerprint: [["-Os"], ["-O2", "mergefunc"]]}
    coreset = build_coreset(store, split=package_split(TRAIN_PACKAGE))
    chosen = coreset["objectives"].get("text_size", [])
    assert coreset["version"] and all(item["gain"] > 0 for item in chosen)


def test_two_labellers_of_one_bundle_merge_home_in_either_order(real_root, tmp_path, capsys):
    import tarfile

    from optserve.corpus.cli import main as dataset_main

    quiet = {"progress": False, "log": lambda _: None}
    archives = {}
    for objective in (
        "text_size",
        "instruction_count",
    ):  # each labeller on its own copy, as on the lent machine
        root = tmp_path / objective
        shutil.copytree(real_root, root)
        corpus = RealCorpusLayout(root).corpus("functions")
        label(
            corpus,
            corpus.shards(),
            "local",
            LabelConfig(budget=6, objectives=(objective,)),
            ProcessRunner(1),
            **quiet,
        )
        archives[objective] = tmp_path / f"{objective}.tar.xz"
        with tarfile.open(archives[objective], "w:xz") as tar:
            tar.add(corpus.labels_dir, arcname="labels")
    count = len(_examples(real_root, "functions"))
    for order in (("text_size", "instruction_count"), ("instruction_count", "text_size")):
        home = tmp_path / "home" / order[0]
        shutil.copytree(real_root, home)
        corpus = RealCorpusLayout(home).corpus("functions")
        arguments = ["merge", "--corpus", str(corpus.root), *(str(archives[o]) for o in order), "--json"]
        assert dataset_main(arguments) == 0
        labels = read_labels(corpus, "local")
        assert len(labels) == count
        assert all("text_size" in r and "instruction_count" in r for r in labels.values())
        capsys.readouterr()
        assert dataset_main(arguments) == 0  # merging again adds nothing
        assert all(gained == {} for gained in json.loads(capsys.readouterr().out)["gained"].values())
    assert dataset_main(["merge", "--corpus", str(corpus.root), str(tmp_path / "missing.tar.xz")]) == 2
    broken = tmp_path / "broken.tar.xz"
    broken.write_bytes(archives["text_size"].read_bytes()[:200])
    assert dataset_main(["merge", "--corpus", str(corpus.root), str(broken)]) == 2
    assert "is not a labeller's archive" in capsys.readouterr().err


def test_a_capture_root_given_as_a_relative_path_keeps_the_packages_units(real_root, monkeypatch):
    """Captured source paths are absolute; a relative root (pretrain_data's `--real-root data/real`) must
    not make every unit look foreign to its package (and be dropped as a probe)."""
    monkeypatch.chdir(real_root.parent)
    relative = RealCorpusLayout(Path(real_root.name))
    relative.processed(TRAIN_PACKAGE).unlink()  # written again below, the same
    counts = process_package(relative, TRAIN_PACKAGE, ProcessRunner(1))
    assert counts["units"] == 2 and counts["probes"] == 0
