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
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    field_validator,
)

from optserve.compiler.passes import PassListError, format_pass_list, parse_pass_list
from optserve.tuning.base import TuningStore, TuningStoreError
from optserve.tuning.records import Kind, Toolchain, TunedList
from optserve.tuning.sqlite_store import SqliteTuningStore

FORMAT = "optserve-tuning-profile"
VERSION = 1


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


class _ProfileEntry(BaseModel):
    """One entry of a profile file, as written there (validated field by field, pass lists included)."""

    model_config = ConfigDict(extra="forbid")

    objective: StrictStr
    kind: Kind
    ir_hash: Annotated[StrictStr, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    target: StrictStr
    llvm_version: StrictStr
    vocabulary: StrictStr
    pass_list: StrictStr
    function_lists: dict[StrictStr, StrictStr]
    cost: Annotated[StrictInt, Field(ge=0)]
    oz_cost: Annotated[StrictInt, Field(ge=0)]
    compiles: Annotated[StrictInt, Field(ge=0)]
    found_by: StrictStr
    found_at: float

    @field_validator("pass_list")
    @classmethod
    def _known_passes(cls, text: str) -> str:
        parse_pass_list(text)  # PassListError is a ValueError: pydantic reports it with the field
        return text

    @field_validator("function_lists")
    @classmethod
    def _known_function_passes(cls, lists: dict[str, str]) -> dict[str, str]:
        for name, text in lists.items():
            try:
                parse_pass_list(text)
            except PassListError as error:
                raise ValueError(f"function {name!r}: {error}") from None
        return lists

    def tuned_list(self) -> TunedList:
        return TunedList(
            ir_hash=self.ir_hash,
            toolchain=Toolchain(self.objective, self.target, self.llvm_version, self.vocabulary),
            kind=self.kind,
            pass_list=parse_pass_list(self.pass_list),
            function_lists=tuple(
                (name, parse_pass_list(text)) for name, text in sorted(self.function_lists.items())
            ),
            cost=self.cost,
            oz_cost=self.oz_cost,
            compiles=self.compiles,
            found_by=self.found_by,
            found_at=self.found_at,
        )


def _problems(error: ValidationError) -> str:
    """pydantic's findings as one line: `field: what is wrong; ...` (a validator's own message as it is)."""
    found = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "entry"
        message = str(problem["ctx"]["error"]) if problem["type"] == "value_error" else problem["msg"]
        found.append(f"{where}: {message}")
    return "; ".join(found)


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
            entry = _ProfileEntry.model_validate(item).tuned_list()
        except ValidationError as error:
            raise TuningStoreError(f"{path}: entry {number} (ir_hash {name}): {_problems(error)}") from error
        if (first := numbers.setdefault(_sort_key(entry), number)) != number:
            raise TuningStoreError(
                f"{path}: entry {number} (ir_hash {name}) repeats the key of entry {first}"
            )
        entries.append(entry)
    return entries


def import_profile(store: TuningStore, path: str | Path) -> int:
    """Offer the profile's entries to `store` (the cheaper list wins per key); return how many it stored."""
    return store.offer(read_profile(path))


def open_profile_store(path: str | Path) -> SqliteTuningStore:
    """A read-only in-memory store holding exactly the profile's entries (it records no units, raw or not:
    `record_raw` answers False and no raw unit is ever pending)."""
    entries = read_profile(path)
    store = SqliteTuningStore(":memory:", max_recorded_bytes=1)
    store.offer(entries)
    store.read_only = True
    store.where = f"the tuning profile {path}"
    return store
