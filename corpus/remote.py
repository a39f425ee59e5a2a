"""Labelling on another machine without a shared file system: bundles of shards that travel there and back.

`make_bundle` packs the chosen example shards with every label file the corpus has so far (label files hold
no IR, so they are small; the broadcast stage needs all autotune labels of a split). On the far side,
`corpus/label_remote.sh` unpacks the bundle into a scratch corpus, labels it (resuming from the journals in
the bundle) and packs `labels/` back; unpacking that into the corpus directory here merges it, because every
label file belongs to exactly one shard.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from optserve.corpus.layout import CorpusLayout


def make_bundle(layout: CorpusLayout, shards: list[Path], out: Path, labels: bool = True) -> int:
    """Write the bundle (.tar.xz); returns its size in bytes.

    Stage `measure` needs no labels: `labels=False` packs the examples only.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w:xz") as tar:
        for shard in shards:
            tar.add(shard, arcname=f"examples/{shard.name}")
        if labels and layout.labels_dir.exists():
            for label_file in sorted(layout.labels_dir.rglob("*.json*")):
                tar.add(label_file, arcname=label_file.relative_to(layout.root).as_posix())
    tmp.replace(out)
    return out.stat().st_size
