"""Tuning profiles: a store's lists for a project as one reviewable, versioned JSON file, as `.profdata` is
for PGO. Committed beside the source, it makes a release build reproducible: same source, same profile and
same toolchain give the same objects (`open_store("profile:FILE")` serves exactly its lists, read-only).

    {
      "format": "optserve-tuning-profile",
      "version": 1,
      "entries": [
        {"objective": ..., "kind": "function" | "unit", "ir_hash": ..., "target": ..., "llvm_version": ...,
         "vocabulary": ..., "pass_list": "-Oz instcombine", "function_lists": {"name": "list", ...},
         "cost": ..., "oz_cost": ..., "compiles": ..., "found_by": ..., "found_at": ...},
        ...
      ]
    }

Entries are sorted by (objective, kind, IR hash, target, LLVM version, vocabulary); pass lists are in the
service's text form (`optserve.compiler.passes.format_pass_list`); no IR is inside. The same store content
always gives the same bytes.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optserve.compiler.passes import PassListError, format_pass_list, parse_pass_list
from optserve.tuning.base import TuningStore, TuningStoreError
from optserve.tuning.records import KINDS, Toolchain, TunedList
from optserve.tuning.sqlite_store import SqliteTuningStore

FORMAT = "optserve-tuning-profile"
VERSION = 1
_HASH = re.compile(r"[0-9a-f]{64}")
_TEXT_FIELDS = ("objective", "target", "llvm_version", "vocabulary", "found_by")
_COUNT_FIELDS = ("cost", "oz_cost", "compiles")


def _sort_key(entry: TunedList) -> tuple[str, ...]:
    toolchain = entry.toolchain
    return (toolchain.objective, entry.kind, entry.ir_hash, toolchain.target, toolchain.llvm_version,
            toolchain.vocabulary)  # fmt: skip


def _entry_json(entry: TunedList) -> dict[str, Any]:
    toolchain = entry.toolchain
    return {
        "objective": toolchain.objective,
        "kind": entry.kind,
        "ir_hash": entry.ir_hash,
        "target": toolchain.target,
        "llvm_version": toolchain.llvm_version,
        "vocabulary": toolchain.vocabulary,
        "pass_list": format_pass_list(entry.pass_list),
        "function_lists": {name: format_pass_list(passes) for name, passes in entry.function_lists},
        "cost": entry.cost,
        "oz_cost": entry.oz_cost,
        "compiles": entry.compiles,
        "found_by": entry.found_by,
        "found_at": entry.found_at,
    }


def profile_text(entries: Sequence[TunedList]) -> str:
    """The profile file's text for `entries` (sorted here)."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "entries": [_entry_json(entry) for entry in sorted(entries, key=_sort_key)],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def export_profile(store: TuningStore, path: str | Path, objectives: set[str] | None = None) -> int:
    """Write the store's entries (those of `objectives`, when given) to the profile `path`; return how many.
    The file is replaced atomically: a reader never sees half a profile."""
    entries = [e for e in store.entries() if objectives is None or e.toolchain.objective in objectives]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as file:
        file.write(profile_text(entries))
    os.replace(file.name, path)
    return len(entries)


def read_profile(path: str | Path) -> list[TunedList]:
    """The entries of the profile `path`; TuningStoreError names the file and the entry that is wrong."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TuningStoreError(f"cannot read the tuning profile {path}: {error}") from error
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise TuningStoreError(f"{path} is not a tuning profile (its format is not {FORMAT!r})")
    if document.get("version") != VERSION:
        raise TuningStoreError(
            f"{path} is a tuning profile of version {document.get('version')!r}; this optserve reads version "
            f"{VERSION}: export it again with this optserve, or upgrade"
        )
    items = document.get("entries")
    if not isinstance(items, list):
        raise TuningStoreError(f"{path}: 'entries' is not a list")
    entries = []
    numbers: dict[tuple[str, ...], int] = {}
    for number, item in enumerate(items, start=1):
        name = item.get("ir_hash", "?") if isinstance(item, dict) else "?"
        try:
            entry = _entry(item)
        except (PassListError, ValueError, TypeError, KeyError) as error:
            raise TuningStoreError(f"{path}: entry {number} (ir_hash {name}): {error}") from error
        if (first := numbers.setdefault(_sort_key(entry), number)) != number:
            raise TuningStoreError(
                f"{path}: entry {number} (ir_hash {name}) repeats the key of entry {first}"
            )
        entries.append(entry)
    return entries


def _entry(item: Any) -> TunedList:
    if not isinstance(item, dict):
        raise TypeError("an entry is a JSON object")
    missing = {
        "kind",
        "ir_hash",
        "pass_list",
        "function_lists",
        *_TEXT_FIELDS,
        *_COUNT_FIELDS,
        "found_at",
    } - set(item)
    if missing:
        raise KeyError(f"missing fields: {', '.join(sorted(missing))}")
    for field in _TEXT_FIELDS:
        if not isinstance(item[field], str):
            raise TypeError(f"{field} is not a string")
    for field in _COUNT_FIELDS:
        if not isinstance(item[field], int) or isinstance(item[field], bool) or item[field] < 0:
            raise ValueError(f"{field} is not a non-negative integer: {item[field]!r}")
    if item["kind"] not in KINDS:
        raise ValueError(f"kind is {item['kind']!r}, not one of {', '.join(KINDS)}")
    if not isinstance(item["ir_hash"], str) or not _HASH.fullmatch(item["ir_hash"]):
        raise ValueError("ir_hash is not a SHA-256 hex digest")
    if not isinstance(item["pass_list"], str) or not isinstance(item["function_lists"], dict):
        raise TypeError("pass_list is a string and function_lists an object of strings")
    if not isinstance(item["found_at"], int | float) or isinstance(item["found_at"], bool):
        raise TypeError("found_at is not a number")
    function_lists = []
    for name, text in sorted(item["function_lists"].items()):
        if not isinstance(text, str):
            raise TypeError(f"the list of function {name!r} is not a string")
        try:
            function_lists.append((name, parse_pass_list(text)))
        except PassListError as error:
            raise PassListError(f"function {name!r}: {error}") from error
    return TunedList(
        ir_hash=item["ir_hash"],
        toolchain=Toolchain(item["objective"], item["target"], item["llvm_version"], item["vocabulary"]),
        kind=item["kind"],
        pass_list=parse_pass_list(item["pass_list"]),
        function_lists=tuple(function_lists),
        cost=item["cost"],
        oz_cost=item["oz_cost"],
        compiles=item["compiles"],
        found_by=item["found_by"],
        found_at=float(item["found_at"]),
    )


def import_profile(store: TuningStore, path: str | Path) -> int:
    """Offer the profile's entries to `store` (the cheaper list wins per key); return how many it stored."""
    return store.offer(read_profile(path))


def open_profile_store(path: str | Path) -> SqliteTuningStore:
    """A read-only in-memory store holding exactly the profile's entries (it records no units)."""
    entries = read_profile(path)
    store = SqliteTuningStore(":memory:", max_recorded_bytes=1)
    store.offer(entries)
    store.read_only = True
    store.where = f"the tuning profile {path}"
    return store
