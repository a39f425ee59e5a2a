"""Labelling on another machine without a shared file system: bundles of shards that travel there and back.

`make_bundle` packs the chosen example shards with every label file the corpus has so far (label files hold
no IR, so they are small; the broadcast stage needs all autotune labels of a split). On the far side,
`corpus/label_remote.sh` unpacks the bundle into a scratch corpus, labels it (resuming from the journals in
the bundle) and packs `labels/` back. `merge_returned` brings those labels home: per example it adds the
objectives the corpus lacks, so the archives of two labellers that searched the same shards for different
objectives (one call, two bundles' copies) both count, whichever is merged first.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from optserve.corpus.journal import Journal
from optserve.corpus.label import merged_label, read_labels
from optserve.corpus.layout import CorpusLayout

LABELS = ("all", "own", "none")  # which label files travel: every one, the bundled shards' (+ seeds), none


def make_bundle(layout: CorpusLayout, shards: list[Path], out: Path, labels: str = "all") -> int:
    """Write the bundle (.tar.xz); returns its size in bytes.

    Stages `local` and `measure` need only the bundled shards' own labels (`own`, or `none` to start over);
    `broadcast` needs every autotune label of a split (`all`).
    """
    if labels not in LABELS:
        raise ValueError(f"labels must be one of {LABELS}, not {labels!r}")
    names = {shard.stem for shard in shards}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w:xz") as tar:
        for shard in shards:
            tar.add(shard, arcname=f"examples/{shard.name}")
        if labels != "none" and layout.labels_dir.exists():
            for label_file in sorted(layout.labels_dir.rglob("*.json*")):
                shard_name = label_file.name.removesuffix(".jsonl").removesuffix(".journal")  # libpng1.6-000
                own = shard_name in names or label_file.parent.name == "seeds"
                if labels == "all" or own:
                    tar.add(label_file, arcname=label_file.relative_to(layout.root).as_posix())
    tmp.replace(out)
    return out.stat().st_size


def merge_returned(layout: CorpusLayout, archive: Path) -> dict[str, int]:
    """Merge a labeller's returned archive (`label_remote.sh`'s $OUT/NAME.tar.xz) into the corpus.

    An example's objectives that the corpus has no label for are journaled beside its existing ones (an error
    record only where the corpus has nothing); what the corpus holds already is kept. Returns, per stage, how
    many examples gained a label.
    """
    gained: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(archive) as tar:
            tar.extractall(scratch, filter="data")
        returned = CorpusLayout(Path(scratch))
        if not returned.labels_dir.exists():
            return gained
        for seeds in returned.labels_dir.glob("*/seeds/*.json"):  # seed sets the labels name by fingerprint
            home = layout.root / seeds.relative_to(returned.root)
            if not home.exists():
                home.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(seeds, home)
        for stage_dir in sorted(d for d in returned.labels_dir.iterdir() if d.is_dir()):
            stage = stage_dir.name
            for shard in layout.shards():
                theirs = read_labels(returned, stage, [shard])
                if not theirs:
                    continue
                ours = read_labels(layout, stage, [shard])
                with Journal(layout.label_journal(stage, shard)) as journal:
                    for key, record in theirs.items():
                        merged = _with_missing(ours.get(key), record)
                        if merged is not None:
                            journal.append(merged)
                            gained[stage] = gained.get(stage, 0) + 1
    return gained


def _with_missing(ours: dict | None, theirs: dict) -> dict | None:
    """Our record with the objectives only theirs has; theirs where we have nothing or an error (None: nothing
    to add). The same per-objective merge as `read_labels`, with ours as the later record."""
    merged = merged_label(ours, theirs) if ours is None or "error" in ours else merged_label(theirs, ours)
    return None if merged == ours else merged
