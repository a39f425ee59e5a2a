"""Pretraining data for the pass-ordering model: unlabelled IR as token shards, held-out code and leaks out.

    python -m optserve.passlm.pretrain_data --out runs/pretrain/data \
        --real-root data/real --corpus data/corpus --labels data/labels/real \
        --archive runs/pretrain/carry/pretrain_data.tar.xz --archive-mb 30

Unlabelled IR costs no compiles, so everything the project has captured can teach the model the language of
IR before it learns pass lists. The documents, and what keeps evaluation clean:

- **Sources.** Real C (`--real-root`): per package, the processed units and functions that
  `corpus/real_corpus.py` writes under `<root>/processed/` (the assembled corpora are made from the same
  files); packages of the train split only (`real_corpus.package_split`, split by package). Corpora in the
  `CorpusLayout` form (`--corpus`, e.g. the test-suite corpus `data/corpus`: GCC testsuite, LLVM Transforms
  tests, csmith, split by source file): their train split. The val split of each source becomes the
  validation stream (loss on code the model never trained on); the test split is only ever hashed.
- **Held-out code.** A package named like zlib, lua, libjpeg or MiBench (`real_packages.EXCLUDED`), or a
  file with such a path component, is dropped before it is read.
- **Leakage.** Every id (SHA-256 of the normalized IR, the corpus' own key) of a val or test document of
  any source, of the committed val/test labels (`--labels`) and of the real val/test packages' units and
  functions is protected: a train document with a protected id is dropped, and so is a train unit that
  contains a protected function. Val documents lose test ids the same way. Train documents are then
  deduplicated by id across sources (units and functions are distinct documents: a function also appears
  inside its unit, in context).
- **Text.** A document is its IR as the model reads it in a prompt: normalized (`compiler.ir.normalize_ir`,
  as the service does before prompting) inside the prompt template's `<ir>` ... `</ir>` lines
  (`PASSFORMER_PROFILE`), so pretraining and fine-tuning share one input format.
- **Tokens.** The bundled tokenizer (`models/passformer`, byte-level BPE, 8,228 ids, every pass name one
  token): fine-tuning examples, the engine's grammar and the packaged model already use it, so a pretrained
  model drops into `passlm/train.py --init-from` and the engine unchanged; its ids fit uint16.
- **Shards.** Documents in a fixed shuffled order (by hash: any prefix of shards samples every source), each
  as BOS + tokens + EOS, concatenated and cut into shards of `--shard-tokens` tokens (`.npy`, uint16);
  `manifest.json` holds sources, counts, drops and token totals per source and split, and each shard's
  SHA-256; `train_ids.txt.xz` lists the train documents' ids for later leakage checks.

Resumable: each input file's tokenized documents are cached under `<out>/cache/` (keyed by the file's size and
modification time and the tokenizer), so a rerun with more packages processed tokenizes only what is new; the
final step (protection, dedup, order, shards) is cheap and always recomputed from the caches.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import sys
import tarfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SPLITS = ("train", "val", "test")
HELD_OUT_PATH = re.compile(r"^(zlib|lua|libjpeg|jpeg|mibench)", re.IGNORECASE)
SHARD_PREFIX = {"train": "train", "val": "val"}
MANIFEST = "manifest.json"


@dataclass
class Document:
    """One unlabelled IR document: its id (normalized-IR hash), where it came from, its text."""

    id: str
    source: str  # "real-units", "real-functions", or a corpus' source (gcc-dg, llvm-transforms, ...)
    split: str
    group: str  # package (real code) or source file: what a split keeps together
    text: str
    contains: list[str] = field(default_factory=list)  # a unit's function ids


def is_held_out(package: str, file: str = "") -> bool:
    """zlib, lua, libjpeg and MiBench code, by package name or by a path component of the file."""
    from optserve.corpus.real_packages import EXCLUDED

    if EXCLUDED.match(package or ""):
        return True
    return any(HELD_OUT_PATH.match(part) for part in Path(file).parts)


def ir_document(normalized_ir: str) -> str:
    """The IR as it stands in the model's prompt: the template's text around `{ir}`, up to `</ir>\\n`."""
    from optserve.engine.passformer import PASSFORMER_PROFILE

    head, tail = PASSFORMER_PROFILE.prompt_template.split("{ir}", 1)
    return head + normalized_ir + tail.split("\n", 1)[0] + "\n"


def normalized(ir: str, expected_id: str) -> str | None:
    """`ir` normalized (already so when its hash is the id, as for corpus functions); None if it fails."""
    from optserve.compiler.ir import IRError, normalize_ir
    from optserve.corpus.functions import ir_hash

    if ir_hash(ir) == expected_id:
        return ir
    try:
        return normalize_ir(ir)
    except IRError:
        return None


# ---- inputs: one "input file" is the unit of caching ----------------------------------------------------


@dataclass(frozen=True)
class InputFile:
    source: str  # "real" or the corpus name
    path: Path
    split: str | None  # known from the name (real packages), else per record

    @property
    def cache_name(self) -> str:
        return f"{self.source}--{self.path.name}"


def real_inputs(real_root: Path) -> list[InputFile]:
    from optserve.corpus.real_corpus import package_split

    processed = sorted((real_root / "processed").glob("*.jsonl.xz"))
    return [InputFile("real", p, package_split(p.name.removesuffix(".jsonl.xz"))) for p in processed]


def corpus_inputs(corpus: Path) -> list[InputFile]:
    from optserve.corpus.layout import CorpusLayout

    return [InputFile(corpus.name, p, None) for p in CorpusLayout(corpus).shards()]


def read_documents(item: InputFile, drops: Counter) -> Iterator[Document]:
    """The documents of one input file (test split included: its ids protect the others), held-out dropped."""
    from optserve.corpus.journal import read_jsonl

    if item.source == "real":
        package = item.path.name.removesuffix(".jsonl.xz")
        if is_held_out(package):
            drops["held_out_package"] += 1
            return
        with lzma.open(item.path, "rt") as lines:
            for line in lines:
                record = json.loads(line)
                unit, functions = record["unit"], record["functions"]
                if is_held_out(package, unit.get("file", "")):
                    drops["held_out_file"] += 1
                    continue
                for function in functions:
                    yield Document(function["id"], "real-functions", item.split, package, function["ir"])
                if unit.get("ir") is None:
                    drops["real_unit_too_large"] += 1
                    continue
                yield Document(
                    unit["id"], "real-units", item.split, package, unit["ir"], [f["id"] for f in functions]
                )
        return
    for example in read_jsonl(item.path):
        if is_held_out(example.get("package", ""), example.get("file", "")):
            drops["held_out_file"] += 1
            continue
        group = f"{example.get('source', item.source)}:{example.get('file', '')}"
        yield Document(
            example["id"], example.get("source", item.source), example["split"], group, example["ir"]
        )


# ---- cache: tokenized train/val documents and the ids of every document, per input file -----------------


def tokenizer_fingerprint(tokenizer_dir: Path) -> str:
    return hashlib.sha256((tokenizer_dir / "tokenizer.json").read_bytes()).hexdigest()[:16]


def cache_key(item: InputFile, fingerprint: str) -> str:
    stat = item.path.stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}:{fingerprint}"


def tokenize_input(item: InputFile, tokenizer, cache_dir: Path, fingerprint: str, batch: int = 64) -> dict:
    """Tokenize one input file's train and val documents into `cache_dir` (once); returns its metadata.

    Test documents are not tokenized: only their ids are kept, to protect them. Metadata: documents
    [{id, source, split, group, tokens, contains}], drops; tokens in a flat uint16 `.npy` (document order).
    """
    meta_path = cache_dir / f"{item.cache_name}.json"
    key = cache_key(item, fingerprint)
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta["key"] == key:
            return meta
    drops: Counter = Counter()
    documents: list[dict] = []
    pending: list[Document] = []
    arrays: list[np.ndarray] = []

    def flush() -> None:
        texts = [ir_document(d.text) for d in pending]
        for document, ids in zip(
            pending, tokenizer(texts, add_special_tokens=False)["input_ids"], strict=True
        ):
            arrays.append(np.asarray(ids, dtype=np.uint16))
            documents.append(_doc_meta(document, len(ids)))
        pending.clear()

    for document in read_documents(item, drops):
        if document.split == "test":
            documents.append(_doc_meta(document, 0))
            continue
        text = normalized(document.text, document.id)
        if text is None:
            drops["invalid_ir"] += 1
            continue
        document.text = text
        pending.append(document)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    tokens = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.uint16)
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = cache_dir / f"{item.cache_name}.npy.partial"
    with open(partial, "wb") as handle:
        np.save(handle, tokens)
    partial.replace(cache_dir / f"{item.cache_name}.npy")
    meta = {"key": key, "input": str(item.path), "tokens_file": f"{item.cache_name}.npy"}
    meta |= {"documents": documents, "drops": dict(drops)}
    meta_path.with_suffix(".partial").write_text(json.dumps(meta))
    meta_path.with_suffix(".partial").replace(meta_path)
    return meta


def _doc_meta(document: Document, tokens: int) -> dict:
    meta = {"id": document.id, "source": document.source, "split": document.split, "group": document.group}
    meta["tokens"] = tokens
    if document.contains:
        meta["contains"] = document.contains
    return meta


def protected_label_ids(labels_dir: Path) -> set[str]:
    """Ids of the committed val/test labels (`data/labels/<corpus>/*-{val,test}.jsonl.xz`)."""
    ids: set[str] = set()
    for path in sorted(labels_dir.glob("*-val.jsonl.xz")) + sorted(labels_dir.glob("*-test.jsonl.xz")):
        with lzma.open(path, "rt") as lines:
            ids.update(json.loads(line)["key"] for line in lines if line.strip())
    return ids


# ---- selection: protection, dedup, order -------------------------------------------------------------------


def select(metas: list[dict], protected_extra: Iterable[str] = ()) -> tuple[dict, Counter]:
    """{split: [(meta index, document index)]} of the kept train and val documents, in their shard order,
    and the drop counts. `protected_extra`: ids kept out of train and val whatever the corpora say."""
    held = {"val": set(), "test": set(protected_extra)}
    for meta in metas:
        for doc in meta["documents"]:
            if doc["split"] in held:
                held[doc["split"]].add(doc["id"])
    protected = {"train": held["val"] | held["test"], "val": held["test"]}
    drops: Counter = Counter()
    chosen: dict[str, dict[str, tuple[int, int]]] = {"train": {}, "val": {}}
    for m, meta in enumerate(metas):
        for d, doc in enumerate(meta["documents"]):
            split = doc["split"]
            if split not in chosen:
                continue
            if doc["id"] in protected[split]:
                drops[f"{split}_leaked_id"] += 1
            elif any(f in protected[split] for f in doc.get("contains", ())):
                drops[f"{split}_unit_with_held_out_function"] += 1
            elif doc["id"] in chosen[split]:
                drops[f"{split}_duplicate"] += 1
            else:
                chosen[split][doc["id"]] = (m, d)
    order = {split: [chosen[split][i] for i in sorted(chosen[split], key=_shuffle_key)] for split in chosen}
    return order, drops


def _shuffle_key(document_id: str) -> str:
    return hashlib.sha256(f"optserve-pretrain:{document_id}".encode()).hexdigest()


# ---- shards ----------------------------------------------------------------------------------------------


def write_shards(
    metas: list[dict],
    cache_dir: Path,
    order: dict,
    out: Path,
    shard_tokens: int,
    bos: int,
    eos: int,
) -> dict:
    """Pack each split's documents (BOS + tokens + EOS) into `.npy` shards; returns per-split shard lists."""
    offsets = [np.concatenate([[0], np.cumsum([d["tokens"] for d in m["documents"]])]) for m in metas]
    loaded: dict[int, np.ndarray] = {}

    def tokens_of(m: int, d: int) -> np.ndarray:
        if m not in loaded:
            loaded[m] = np.load(cache_dir / metas[m]["tokens_file"], mmap_mode="r")
        return loaded[m][offsets[m][d] : offsets[m][d + 1]]

    for stale in out.glob("*.npy"):
        stale.unlink()
    shards: dict[str, list[dict]] = {}
    for split, items in order.items():
        shards[split] = []
        buffer: list[np.ndarray] = []
        filled = 0
        for m, d in items:
            document = np.concatenate([[bos], tokens_of(m, d), [eos]]).astype(np.uint16)
            while document.size:
                take = document[: shard_tokens - filled]
                buffer.append(take)
                filled += take.size
                document = document[take.size :]
                if filled == shard_tokens:
                    shards[split].append(_write_shard(out, split, len(shards[split]), buffer))
                    buffer, filled = [], 0
        if filled:
            shards[split].append(_write_shard(out, split, len(shards[split]), buffer))
    return shards


def _write_shard(out: Path, split: str, index: int, parts: list[np.ndarray]) -> dict:
    array = np.concatenate(parts).astype(np.uint16)
    path = out / f"{SHARD_PREFIX[split]}-{index:04d}.npy"
    np.save(path, array)
    return {"file": path.name, "tokens": int(array.size), "sha256": _sha256(path.read_bytes())}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_shards(data_dir: Path, split: str = "train") -> np.ndarray:
    """One split's token stream (the shards in order), checked against the manifest's hashes."""
    manifest = json.loads((data_dir / MANIFEST).read_text())
    arrays = []
    for shard in manifest["shards"].get(split, []):
        path = data_dir / shard["file"]
        if not path.exists():
            continue  # a carried subset of the shards: the manifest says which were packed
        if _sha256(path.read_bytes()) != shard["sha256"]:
            raise ValueError(f"{path}: contents differ from the manifest (a partial copy?)")
        arrays.append(np.load(path))
    if not arrays:
        raise FileNotFoundError(f"no {split} shards of {data_dir / MANIFEST} found in {data_dir}")
    return np.concatenate(arrays)


def pack_archive(data_dir: Path, archive: Path, budget_mb: float) -> dict:
    """The manifest and as many train shards (in order) as fit `budget_mb` of xz, plus the val shards first.

    Shards hold documents in a shuffled order, so the first k are an even sample of every source."""
    manifest = json.loads((data_dir / MANIFEST).read_text())
    archive.parent.mkdir(parents=True, exist_ok=True)
    packed: dict[str, list[str]] = {"val": [], "train": []}
    compressed = {}
    budget = budget_mb * 1e6
    used = 0
    for split in ("val", "train"):
        for shard in manifest["shards"].get(split, []):
            size = len(lzma.compress((data_dir / shard["file"]).read_bytes(), preset=6))
            if used + size > budget:
                break
            used += size
            packed[split].append(shard["file"])
            compressed[shard["file"]] = size
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w:xz", preset=6) as tar:
        tar.add(data_dir / MANIFEST, arcname=MANIFEST)
        for name in packed["val"] + packed["train"]:
            tar.add(data_dir / name, arcname=name)
    partial.replace(archive)
    tokens = {
        split: sum(s["tokens"] for s in manifest["shards"].get(split, []) if s["file"] in packed[split])
        for split in packed
    }
    return {
        "archive": str(archive),
        "megabytes": round(archive.stat().st_size / 1e6, 2),
        "shards": {k: len(v) for k, v in packed.items()},
        "tokens": tokens,
        "bytes_per_token": round(archive.stat().st_size / max(1, sum(tokens.values())), 3),
    }


# ---- the whole collection ----------------------------------------------------------------------------------


def collect(
    out: Path,
    tokenizer_dir: Path,
    real_root: Path | None = None,
    corpora: tuple[Path, ...] = (),
    labels: tuple[Path, ...] = (),
    shard_tokens: int = 1 << 24,
    log=print,
) -> dict:
    """Cache, select and shard every input; writes and returns the manifest."""
    from transformers import PreTrainedTokenizerFast

    started = time.monotonic()
    tokenizer_dir = Path(tokenizer_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    if len(tokenizer) > np.iinfo(np.uint16).max:
        raise ValueError(f"{tokenizer_dir}: {len(tokenizer)} ids do not fit uint16 shards")
    fingerprint = tokenizer_fingerprint(tokenizer_dir)
    inputs: list[InputFile] = []
    if real_root is not None:
        found = real_inputs(real_root)
        if not found:
            log(f"warning: no processed packages under {real_root}/processed (run corpus/real_corpus.py)")
        inputs += found
    for corpus in corpora:
        found = corpus_inputs(corpus)
        if not found:
            raise FileNotFoundError(f"{corpus}: no example shards (examples/*.jsonl)")
        inputs += found
    if not inputs:
        raise FileNotFoundError("no inputs: give --real-root with processed packages or --corpus")
    # held-out inputs first: their ids protect the rest even if a run is cut short
    inputs.sort(key=lambda i: (i.split == "train", i.source, i.path.name))
    cache_dir = out / "cache"
    metas = []
    for index, item in enumerate(inputs, 1):
        meta = tokenize_input(item, tokenizer, cache_dir, fingerprint)
        metas.append(meta)
        log(f"[{index}/{len(inputs)}] {item.source} {item.path.name}: {len(meta['documents'])} documents")
    protected_extra: set[str] = set()
    for labels_dir in labels:
        protected_extra |= protected_label_ids(labels_dir)
    order, select_drops = select(metas, protected_extra)
    shards = write_shards(
        metas, cache_dir, order, out, shard_tokens, tokenizer.bos_token_id, tokenizer.eos_token_id
    )
    totals: dict = defaultdict(lambda: defaultdict(Counter))
    for split, items in order.items():
        for m, d in items:
            doc = metas[m]["documents"][d]
            entry = totals[doc["source"]][split]
            entry["documents"] += 1
            entry["tokens"] += doc["tokens"] + 2  # with BOS and EOS
    seen_ids = Counter()
    for meta in metas:
        for doc in meta["documents"]:
            seen_ids[(doc["source"], doc["split"])] += 1
    drops = Counter(select_drops)
    for meta in metas:
        drops.update(meta["drops"])
    train_groups = sorted({metas[m]["documents"][d]["group"] for m, d in order["train"]})
    with lzma.open(out / "train_ids.txt.xz", "wt") as handle:
        handle.write("".join(metas[m]["documents"][d]["id"] + "\n" for m, d in order["train"]))
    manifest = {
        "tokenizer": {
            "path": str(tokenizer_dir),
            "fingerprint": fingerprint,
            "vocab": len(tokenizer),
            "bos": tokenizer.bos_token_id,
            "eos": tokenizer.eos_token_id,
        },  # fmt: skip
        "dtype": "uint16",
        "document_format": "BOS + '<ir>\\n' + normalized IR + '</ir>\\n' + EOS, concatenated",
        "inputs": {
            "real_root": str(real_root) if real_root else None,
            "corpora": [str(c) for c in corpora],
            "labels": [str(p) for p in labels],
            "files": len(inputs),
        },  # fmt: skip
        "real_packages": _real_packages(inputs),
        "documents_read": {f"{s}/{sp}": n for (s, sp), n in sorted(seen_ids.items())},
        "kept": {
            source: {split: dict(c) for split, c in by_split.items()} for source, by_split in totals.items()
        },
        "tokens": {split: sum(s["tokens"] for s in shards[split]) for split in shards},
        "drops": dict(sorted(drops.items())),
        "protected_ids": len(protected_extra),
        "train_groups": len(train_groups),
        "shard_tokens": shard_tokens,
        "shards": shards,
        "seconds": round(time.monotonic() - started, 1),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _real_packages(inputs: list[InputFile]) -> dict:
    by_split: dict[str, list[str]] = defaultdict(list)
    for item in inputs:
        if item.source == "real":
            by_split[item.split].append(item.path.name.removesuffix(".jsonl.xz"))
    return {split: sorted(names) for split, names in sorted(by_split.items())}


def process_captured(real_root: Path, workers: int, log=print) -> list[str]:
    """Process the captured packages that have no `processed/` file yet, held-out splits first: the same
    work (and files) as `corpus/real_corpus.py`'s first step, which then skips them."""
    from optserve.corpus.parallel import ProcessRunner
    from optserve.corpus.real_corpus import RealCorpusLayout, package_split, process_package
    from optserve.corpus.real_packages import CaptureLayout

    layout = RealCorpusLayout(real_root)
    captured = [s.package for s in CaptureLayout(real_root).statuses() if s.ok]
    todo = [p for p in captured if not layout.processed(p).exists() and not is_held_out(p)]
    todo.sort(key=lambda p: (package_split(p) == "train", p))
    runner = ProcessRunner(workers)
    for package in todo:
        summary = process_package(layout, package, runner)
        log(f"processed {package} ({package_split(package)}): {summary}")
    return todo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/pretrain/data"))
    parser.add_argument("--tokenizer", type=Path, default=Path("models/passformer"))
    parser.add_argument("--real-root", type=Path, help="the real-code capture root (data/real)")
    parser.add_argument(
        "--process-captured",
        action="store_true",
        help="first process captured packages lacking <root>/processed/ files (real_corpus.py's first step)",
    )
    parser.add_argument("--workers", type=int, default=1, help="with --process-captured")
    parser.add_argument("--corpus", type=Path, action="append", default=[], help="a CorpusLayout corpus")
    parser.add_argument(
        "--labels",
        type=Path,
        action="append",
        default=[],
        help="committed label store: val/test ids protected",
    )
    parser.add_argument("--shard-tokens", type=int, default=1 << 24)
    parser.add_argument("--archive", type=Path, help="also pack the manifest and shards into this .tar.xz")
    parser.add_argument("--archive-mb", type=float, default=30.0, help="the archive's size budget")
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # a shared machine: one core per process
    args.out.mkdir(parents=True, exist_ok=True)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        if args.process_captured:
            if args.real_root is None:
                parser.error("--process-captured needs --real-root")
            process_captured(args.real_root, args.workers, log)
        manifest = collect(
            args.out,
            args.tokenizer,
            args.real_root,
            tuple(args.corpus),
            tuple(args.labels),
            args.shard_tokens,
            log,
        )
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    result = {k: manifest[k] for k in ("tokens", "kept", "drops", "seconds")}
    if args.archive:
        result["archive"] = pack_archive(args.out, args.archive, args.archive_mb)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
