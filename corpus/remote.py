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
                own = label_file.name.split(".")[0] in names or label_file.parent.name == "seeds"
                if labels == "all" or own:
                    tar.add(label_file, arcname=label_file.relative_to(layout.root).as_posix())
    tmp.replace(out)
    return out.stat().st_size
