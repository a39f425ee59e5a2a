"""Train/val/test assignment by SOURCE FILE: every function of a file lands in the same split.

Functions of one file share helpers, types and idioms; splitting by function would leak them from training
into evaluation. The split is a pure function of the file's stable key (builder name + path inside its
package), so it is the same on every machine and does not move when other files are added or removed.
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "val", "test")


def split_of(source_key: str, val_percent: int, test_percent: int) -> str:
    """'train', 'val' or 'test' for a source file key such as 'gcc-torture:gcc/testsuite/...c'."""
    bucket = int.from_bytes(hashlib.sha256(source_key.encode()).digest()[:8], "big") % 100
    if bucket < test_percent:
        return "test"
    if bucket < test_percent + val_percent:
        return "val"
    return "train"
