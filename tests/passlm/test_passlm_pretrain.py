"""Pretraining of the pass-ordering model: unlabelled IR collected without held-out code or leaks, token
shards that round-trip, and a trainer whose resumed run is the uninterrupted one."""

from __future__ import annotations

import hashlib
import json
import lzma
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from optserve.corpus.functions import ir_hash
from optserve.corpus.real_corpus import package_split
from optserve.corpus.real_packages import PACKAGES
from optserve.passlm import pretrain
from optserve.passlm.pretrain_data import MANIFEST, collect, ir_document, pack_archive, read_shards

TOKENIZER = Path(__file__).resolve().parents[2] / "models" / "passformer"
TINY_ARCH = json.dumps(
    {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
    }
)


def _function(name: str, body: str = "ret i32 0") -> dict:
    """A normalized function record (its id is its hash, as the corpus writes it)."""
    ir = f"define i32 @{name}() {{\n{body}\n}}\n"
    return {"id": ir_hash(ir), "function": name, "ir": ir}


def _unit(functions: list[dict], file: str) -> dict:
    ir = "".join(f["ir"] for f in functions)
    return {"id": ir_hash(ir), "file": file, "function": "", "ir": ir}


def _package_of(split: str) -> str:
    return next(p for p in sorted(PACKAGES) if package_split(p) == split)


def _write_processed(root, package: str, units: list[tuple[dict, list[dict]]]) -> None:
    path = root / "processed" / f"{package}.jsonl.xz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt") as out:
        for unit, functions in units:
            out.write(json.dumps({"status": "ok", "unit": unit, "functions": functions}) + "\n")


def _write_corpus(root, examples: dict[str, list[dict]]) -> None:
    (root / "examples").mkdir(parents=True)
    for split, items in examples.items():
        lines = [
            json.dumps({**e, "split": split, "source": "gcc-dg", "package": "gcc-12", "file": e["file"]})
            for e in items
        ]
        (root / "examples" / f"{split}-00000.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def sources(tmp_path):
    """A real root (train, test and a held-out package) and a test-suite corpus, with planted leaks."""
    shared = _function("shared_helper", "ret i32 7")  # in a test package: protected everywhere
    in_val_labels = _function("labelled_in_val", "ret i32 8")
    train_a, train_b = _function("train_a", "ret i32 1"), _function("train_b", "ret i32 2")
    real = tmp_path / "real"
    _write_processed(
        real,
        _package_of("train"),
        [
            (_unit([train_a, train_b], "src/ab.c"), [train_a, train_b]),
            (_unit([train_a, shared], "src/leaky.c"), [train_a, shared]),  # contains a test function
            (_unit([in_val_labels], "src/lab.c"), [in_val_labels]),
        ],
    )
    _write_processed(real, _package_of("test"), [(_unit([shared], "src/t.c"), [shared])])
    zlib_function = _function("deflate_like", "ret i32 9")
    _write_processed(real, "zlib", [(_unit([zlib_function], "deflate.c"), [zlib_function])])
    lua_file = {**_function("lua_thing", "ret i32 10"), "file": "gcc.dg/lua/x.c"}
    suite_train = {**_function("suite_fn", "ret i32 3"), "file": "gcc.dg/a.c"}
    suite_copy = {**shared, "file": "gcc.dg/b.c"}  # the test package's function, in another corpus' train
    suite_val = {**_function("suite_val", "ret i32 4"), "file": "gcc.dg/v.c"}
    corpus = tmp_path / "corpus"
    _write_corpus(corpus, {"train": [suite_train, suite_copy, lua_file], "val": [suite_val], "test": []})
    labels = tmp_path / "labels"
    labels.mkdir()
    with lzma.open(labels / "functions-text_size-val.jsonl.xz", "wt") as out:
        out.write(json.dumps({"key": in_val_labels["id"]}) + "\n")
    expected_train = {
        train_a["id"],
        train_b["id"],
        _unit([train_a, train_b], "src/ab.c")["id"],
        suite_train["id"],
    }
    return {"real": real, "corpus": corpus, "labels": labels, "train": expected_train,
            "val": {suite_val["id"]}, "never": {shared["id"], zlib_function["id"], lua_file["id"],
                                                in_val_labels["id"]}}  # fmt: skip


def _train_ids(out) -> set[str]:
    with lzma.open(out / "train_ids.txt.xz", "rt") as lines:
        return {line.strip() for line in lines}


def test_collection_keeps_train_code_and_drops_held_out_packages_and_leaked_hashes(sources, tmp_path):
    out = tmp_path / "data"
    manifest = collect(
        out, TOKENIZER, sources["real"], (sources["corpus"],), (sources["labels"],), log=lambda _: None
    )
    train = _train_ids(out)
    assert train == sources["train"]
    assert not train & sources["never"]
    assert manifest["drops"]["held_out_package"] == 1  # zlib, never read
    assert manifest["drops"]["held_out_file"] == 1  # a path component named lua
    assert manifest["drops"]["train_leaked_id"] >= 2  # the test function copied into train; the val label
    assert manifest["drops"]["train_unit_with_held_out_function"] == 1
    assert manifest["drops"]["train_duplicate"] == 1  # train_a, alone in two units
    assert manifest["kept"]["gcc-dg"]["val"]["documents"] == 1
    assert "test" not in manifest["tokens"]


def test_shards_round_trip_documents_and_the_archive(sources, tmp_path):
    from transformers import PreTrainedTokenizerFast

    out = tmp_path / "data"
    manifest = collect(
        out, TOKENIZER, sources["real"], (sources["corpus"],), shard_tokens=50, log=lambda _: None
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(TOKENIZER)
    stream = read_shards(out, "train")
    assert stream.dtype == np.uint16 and stream.size == manifest["tokens"]["train"]
    assert all(s["tokens"] == 50 for s in manifest["shards"]["train"][:-1])  # fixed-length shards
    documents = np.split(stream, np.flatnonzero(stream == tokenizer.bos_token_id)[1:])
    texts = {tokenizer.decode(d[1:-1].tolist()) for d in documents}
    assert all(d[0] == tokenizer.bos_token_id and d[-1] == tokenizer.eos_token_id for d in documents)
    assert ir_document(_function("suite_fn", "ret i32 3")["ir"]) in texts
    assert all(t.startswith("<ir>\n") and t.endswith("</ir>\n") for t in texts)

    packed = pack_archive(out, tmp_path / "carry" / "data.tar.xz", budget_mb=10)
    assert packed["tokens"]["train"] == manifest["tokens"]["train"]
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tmp_path / "carry" / "data.tar.xz") as tar:
        tar.extractall(unpacked, filter="data")
    assert np.array_equal(read_shards(unpacked, "train"), stream)
    (unpacked / manifest["shards"]["train"][0]["file"]).write_bytes(b"corrupt")
    with pytest.raises(ValueError, match="differ from the manifest"):
        read_shards(unpacked, "train")


def _synthetic_data(path, tokens: int = 4000) -> None:
    """Shards of random token ids (a few thousand, enough for tiny windows), as pretrain_data writes them."""
    path.mkdir(parents=True)
    rng = np.random.default_rng(0)
    shards = {}
    for split, size in (("train", tokens), ("val", 600)):
        array = rng.integers(3, 200, size=size, dtype=np.uint16)
        np.save(path / f"{split}-0000.npy", array)
        digest = hashlib.sha256((path / f"{split}-0000.npy").read_bytes()).hexdigest()
        shards[split] = [{"file": f"{split}-0000.npy", "tokens": size, "sha256": digest}]
    manifest = {
        "tokenizer": {"path": str(TOKENIZER)},
        "tokens": {"train": tokens, "val": 600},
        "shards": shards,
    }
    (path / MANIFEST).write_text(json.dumps(manifest))


def _pretrain(data, out, *extra: str) -> None:
    flags = ["--data", str(data), "--out", str(out), "--steps", "3", "--seq-len", "16",
             "--long-seq-len", "32", "--long-fraction", "0.34", "--micro-batch", "2", "--accumulate", "2",
             "--warmup", "1",
             "--log-every", "1", "--eval-every", "2", "--eval-windows", "4", "--arch", TINY_ARCH]  # fmt: skip
    assert pretrain.main([*flags, *extra]) == 0


def test_pretraining_resumed_from_its_checkpoint_ends_where_an_uninterrupted_run_does(tmp_path):
    data = tmp_path / "data"
    _synthetic_data(data)
    _pretrain(data, tmp_path / "straight")
    _pretrain(data, tmp_path / "cut", "--stop-after", "2")
    first = torch.load(tmp_path / "cut" / pretrain.CHECKPOINT, weights_only=True)
    assert first["state"]["step"] == 2
    _pretrain(data, tmp_path / "cut", "--resume")
    straight = torch.load(tmp_path / "straight" / pretrain.CHECKPOINT, weights_only=True)
    resumed = torch.load(tmp_path / "cut" / pretrain.CHECKPOINT, weights_only=True)
    assert resumed["state"] == straight["state"] == {"step": 3, "tokens": 3 * 2 * 2 * 16}
    for name, tensor in straight["model"].items():
        assert torch.equal(tensor, resumed["model"][name]), name
    log = [json.loads(line) for line in (tmp_path / "cut" / "log.jsonl").read_text().splitlines()]
    assert [e["seq_len"] for e in log if "loss" in e] == [16, 16, 32]  # the last third at the long window
    assert any("val_loss" in e for e in log)


def test_a_resume_with_other_settings_is_refused(tmp_path):
    data = tmp_path / "data"
    _synthetic_data(data)
    _pretrain(data, tmp_path / "run", "--stop-after", "1")
    with pytest.raises(SystemExit, match="lr"):
        _pretrain(data, tmp_path / "run", "--resume", "--lr", "0.5")


def test_the_pretrained_run_packages_into_a_servable_model_directory(tmp_path):
    from transformers import LlamaForCausalLM

    from optserve.engine.profile import ModelProfile
    from optserve.passlm.package import package

    data = tmp_path / "data"
    _synthetic_data(data)
    _pretrain(data, tmp_path / "run")
    model_dir = package(tmp_path / "run", tmp_path / "model")
    model = LlamaForCausalLM.from_pretrained(model_dir)
    assert model.config.max_position_embeddings == 64 and model.config.num_key_value_heads == 1
    assert ModelProfile.load(model_dir).normalize_ir
    assert json.loads((model_dir / "training_summary.json").read_text())["start"]["params"] > 0
