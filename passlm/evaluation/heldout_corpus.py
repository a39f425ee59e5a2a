"""The held-out real functions as a small archive that travels to the lent GPU host (`passlm/eval_remote.sh`).

    python -m optserve.passlm.evaluation.heldout_corpus --real-root data/real --store data/labels/real \
        --out .carry/eval/heldout_functions.tar.xz

The lent host has no corpus, and the whole `data/real/functions` does not fit a call's 64 MiB. This writes the
test split alone, built the way `corpus/real_corpus.py` builds it: each test package's processed file (made
here from its capture when `data/real/processed/` lacks it, into a scratch root, never into `data/real`), then
`assemble` and the committed labels restored (`corpus/label_store.py`). The archive holds a `CorpusLayout`
(examples, labels, manifest) that `optserve eval passes --corpus` and `tuner_seeds` read unchanged; its
`heldout.json` says which test packages it holds and which were not captured here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any


def test_packages() -> list[str]:
    """Every listed package whose split is test (`real_corpus.package_split`)."""
    from optserve.corpus.real_corpus import package_split
    from optserve.corpus.real_packages import PACKAGES

    return sorted(p for p in PACKAGES if package_split(p) == "test")


def build(real_root: Path, store: Path, out: Path, workers: int | None = None) -> dict[str, Any]:
    """Write the archive `out`; returns what it holds (also `heldout.json` inside it)."""
    from optserve.corpus.label_store import restore, stored_labels
    from optserve.corpus.parallel import ProcessRunner
    from optserve.corpus.real_corpus import RealCorpusLayout, process_package
    from optserve.corpus.real_packages import CaptureLayout

    home = RealCorpusLayout(real_root)
    captured = {s.package for s in CaptureLayout(real_root).statuses() if s.ok}
    with tempfile.TemporaryDirectory(prefix="optserve-heldout-") as scratch:
        root = Path(scratch)
        for name in ("capture", "sources"):  # what process_package reads, never written
            (root / name).symlink_to((real_root / name).resolve())
        scratch_layout = RealCorpusLayout(root)
        included, missing, runner = [], [], None
        for package in test_packages():
            target = scratch_layout.processed(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            if home.processed(package).exists():
                shutil.copy(home.processed(package), target)
                shutil.copy(
                    home.processed(package).with_suffix(".summary.json"), target.with_suffix(".summary.json")
                )
            elif package in captured:
                runner = runner or ProcessRunner(workers)
                process_package(scratch_layout, package, runner)
            else:
                missing.append(package)
                continue
            included.append(package)
        from optserve.corpus.real_corpus import assemble

        stats = assemble(scratch_layout, included)
        corpus = scratch_layout.corpus("functions")
        restored = {
            objective: restore(corpus, "functions", store, (objective,))
            for objective in sorted(stored_labels(store, "functions"))
        }
        summary = {
            "packages": included,
            "not_captured": missing,
            "functions": stats["functions"]["examples"]["test"],
            "labels_restored": restored,
        }
        (corpus.root / "heldout.json").write_text(json.dumps(summary, indent=1) + "\n")
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:xz") as archive:
            for path in ("examples", "labels", "manifest.tsv", "heldout.json"):
                if (corpus.root / path).exists():
                    archive.add(corpus.root / path, arcname=path)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real-root", type=Path, default=Path("data/real"))
    parser.add_argument("--store", type=Path, default=Path("data/labels/real"), help="committed label store")
    parser.add_argument("--out", type=Path, default=Path(".carry/eval/heldout_functions.tar.xz"))
    parser.add_argument("--workers", type=int)
    args = parser.parse_args(argv)
    summary = build(args.real_root.resolve(), args.store.resolve(), args.out, args.workers)
    print(json.dumps(summary | {"archive": str(args.out), "bytes": args.out.stat().st_size}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
