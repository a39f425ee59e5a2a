"""What the tuning store holds for one unit: the one candidate a build's fast path compiles.

A whole-unit entry wins (it was measured linked, as optcc links); else the entries of the unit's functions
make one per-function candidate (functions without an entry keep -Oz); else there is nothing to compile.
In two steps, so that no LLVM parse runs where the lookup runs (a thread of the service's ingress): the
unit's own key (`whole_unit_answer`, text only), then, when its functions decide, their keys
(`tuning.unit_keys.unit_keys`, which splits the unit with LLVM: the service runs it in a compiler worker) and
their entries (`functions_answer`). Both take the toolchain from the caller (`toolchain_of`, which reads the
LLVM version from llvmlite): the service asks a compiler worker for it, so the ingress loads no LLVM at all
(tests/contracts/test_ingress_loads_no_llvm.py). The store's own errors are the caller's to absorb: a store
that fails never fails a request.

Before either, a unit sent as bitcode may need no reading at all (`unread_answer`): while the store holds
nothing for the request's objective under the service's LLVM and vocabulary, or once a tuner has read the
very same bytes (`raw_unit`) as a unit it tuned and kept no entry worth its compile for, the answer is
"nothing stored" whatever the unit holds, so the bytes are recorded as they came (`record_raw`, keyed by
`raw_hash`) and `optserve tune` reads them later.

Worth its compile: a stored answer is compiled on every build whose object cache misses the unit, where
clang's own object costs nothing more, so an answer that saves fewer than `min_saved` bytes against -Oz
(`tuning.min_saved_bytes`) is not given: the unit gets -Oz, as when nothing is stored (docs/tuning.md).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass

from optserve.clients.command_line import is_build_probe  # noqa: F401 (re-exported: one rule)
from optserve.compiler.function_lists import FunctionLists
from optserve.compiler.pipeline import OZ
from optserve.config import TuningSettings
from optserve.tuning.keys import current_toolchain
from optserve.tuning.records import Toolchain, TunedList
from optserve.tuning.store import TuningStore
from optserve.tuning.unit_keys import UnitKeys, unit_hash

logger = logging.getLogger(__name__)
BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")  # bitcode, and its wrapper (compiler/ir.py)
_TRIPLE = re.compile(r'^target triple = "([^"]*)"', re.MULTILINE)


@dataclass(frozen=True)
class StoredAnswer:
    """The store's candidate for a unit (None: nothing stored) and what it was made of."""

    job: tuple[str, ...] | FunctionLists | None  # what the compiler compiles for it
    keys: UnitKeys
    toolchain: Toolchain
    unit_hit: bool = False
    settled: bool = False  # the unit was tuned, or the store is a read-only profile: no newer answer coming
    oz_cost: int | None = None  # a whole-unit entry's -Oz cost, as tuning measured it (same toolchain)
    function_hits: int = 0
    entries_digest: str = ""  # the entries used, for the answer cache's key: a newer entry is a new answer

    @property
    def functions(self) -> int:
        return len(self.keys.function_hashes)


@dataclass(frozen=True)
class UnreadAnswer:
    """What `unread_answer` decided for a unit's bitcode. `read`: the unit must be read (today's lookup),
    and `link` then says whether to link the bytes to the unit read (`TuningStore.link_raw`), `pending`
    whether they are recorded already, unread (the unit is not new to the store). Otherwise nothing is
    stored for it: `settled` as in StoredAnswer, and `record` whether to keep the bytes raw."""

    read: bool
    link: bool = False
    pending: bool = False
    settled: bool = False
    record: bool = False
    # bytes a reader linked to a unit whose own entry is worth its compile: that entry's answer, from the
    # unit's key alone (the bytes are compiled as they came, read once in the compile: no intake, no key)
    stored: StoredAnswer | None = None
    # the key of the unit the bytes are linked to, answered without a read: seen again (`seen_unit`)
    seen: str | None = None


def is_bitcode(data: bytes) -> bool:
    """Whether `data` starts as LLVM bitcode does, bare or in its wrapper (`compiler.ir.parse_ir`'s test)."""
    return data.startswith(BITCODE_MAGICS)


def raw_hash(bitcode: bytes) -> str:
    """The key of a raw unit: SHA-256 (hex) of the exact bytes a client sent."""
    return hashlib.sha256(bitcode).hexdigest()


def unread_answer(
    store: TuningStore, raw: str, objective: str, llvm_version: str, vocabulary: str, min_saved: int = 0
) -> UnreadAnswer:
    """Whether the bitcode of raw hash `raw` can be answered without reading it (no LLVM: text and the
    store only). A linked raw unit whose unit was tuned and kept no unit entry saving `min_saved` bytes
    gets -Oz from `whole_unit_answer` too (settled); one whose unit entry saves that much gets that entry
    (`stored`: read, but by the compile of its lists, not before the lookup); a store that holds nothing
    under (objective, LLVM version, vocabulary) has nothing for any unit. Else the unit is read, and linked
    when it was not yet."""
    known = store.raw_unit(raw)
    linked = known is not None and known[0] is not None
    if linked:
        unit, target = known
        toolchain = Toolchain(objective, target or "", llvm_version, vocabulary)
        tuned = store.tuned_budget(unit, toolchain) > 0
        entry = store.lookup_unit(unit, toolchain)
        if tuned and not _worth(entry, min_saved):
            return UnreadAnswer(read=False, settled=True, seen=unit)
        if _worth(entry, min_saved):
            stored = whole_unit_answer(store, "", toolchain, unit, min_saved)
            return UnreadAnswer(read=True, pending=True, stored=stored, seen=unit)
    if store.holds_entries(objective, llvm_version, vocabulary):
        return UnreadAnswer(read=True, link=not linked and not store.read_only, pending=known is not None)
    return UnreadAnswer(read=False, settled=store.read_only, record=not linked and not store.read_only)


def target_triple(ir: str) -> str:
    """The module's `target triple` ('' when it has none: the host's)."""
    found = _TRIPLE.search(ir)
    return found.group(1) if found else ""


def toolchain_of(ir: str, objective: str) -> Toolchain:
    return current_toolchain(objective, target_triple(ir))


def _worth(entry: TunedList | None, min_saved: int) -> bool:
    """Whether a unit entry saves at least `min_saved` bytes (and anything at all) against -Oz."""
    return entry is not None and entry.saved >= max(min_saved, 1)


def whole_unit_answer(
    store: TuningStore, ir: str, toolchain: Toolchain, whole: str | None = None, min_saved: int = 0
) -> StoredAnswer | None:
    """The store's answer for `ir` (a parsed, verified unit: `compiler.ir.parse_ir`'s text) under
    `toolchain` (`toolchain_of(ir, objective)`) from the unit's own key; None when its functions' keys
    decide (`functions_answer`). A whole-unit entry names its functions, so the unit needs splitting only
    when it has none, was not tuned itself (a tuned unit without an entry gets -Oz), and the store holds any
    function entry under this toolchain (a first build into an empty store splits nothing: the split is most
    of the lookup's time). `whole`: the unit's key when the caller has it (`unit_keys.read_unit`). A unit
    entry saving fewer than `min_saved` bytes counts as none."""
    whole = whole or unit_hash(ir)
    tuned = store.tuned_budget(whole, toolchain) > 0
    settled = store.read_only or tuned
    unit = store.lookup_unit(whole, toolchain)
    if unit is not None and not _worth(unit, min_saved):
        # below the bar: -Oz, as a tuned unit without an entry (its functions' entries gave the entry)
        return StoredAnswer(None, UnitKeys(whole, {}, None), toolchain, settled=settled)
    if unit is not None:
        keys = UnitKeys(whole, {}, None)
        job = (
            FunctionLists.of(dict(unit.function_lists), default=unit.pass_list)
            if unit.function_lists
            else tuple(unit.pass_list)
        )
        digest = f"u:{unit.cost}:{unit.ir_hash}"
        return StoredAnswer(job, keys, toolchain, True, settled, oz_cost=unit.oz_cost, entries_digest=digest)
    # tuning measured this very unit and kept no entry (nothing beat its -Oz), or the store holds no function
    # entry (a first build): the split could find nothing to answer with
    if tuned or not store.has_function_entries(toolchain):
        return StoredAnswer(None, UnitKeys(whole, {}, None), toolchain, settled=settled)
    return None


def functions_answer(
    store: TuningStore, toolchain: Toolchain, keys: UnitKeys, min_saved: int = 0
) -> StoredAnswer:
    """The per-function candidate the entries of the unit's functions make (`keys`: `unit_keys(ir)`) under
    `toolchain`, for a unit `whole_unit_answer` left to them; functions without an entry keep -Oz. Entries
    that together save fewer than `min_saved` bytes (each measured on its function's own module) make
    none."""
    settled = store.read_only  # a tuned unit was answered by whole_unit_answer
    if not keys.function_hashes:
        return StoredAnswer(None, keys, toolchain, settled=settled)
    found = store.lookup_functions(sorted(set(keys.function_hashes.values())), toolchain)
    lists = {name: found[h].pass_list for name, h in keys.function_hashes.items() if h in found}
    saved = sum(found[keys.function_hashes[name]].saved for name in lists)
    if not lists or all(tuple(p) == OZ for p in lists.values()) or saved < min_saved:
        return StoredAnswer(None, keys, toolchain, settled=settled, function_hits=len(lists))
    digest = ",".join(f"{h}:{found[h].cost}" for h in sorted({keys.function_hashes[n] for n in lists}))
    job = FunctionLists.of(lists, default=OZ)
    hits = len(lists)
    return StoredAnswer(job, keys, toolchain, settled=settled, function_hits=hits, entries_digest=digest)


def open_service_store(tuning: TuningSettings) -> TuningStore | None:
    """The service's tuning store from its settings: the profile file, read-only, when one is set (an
    unreadable profile stops the service: a reproducible build asked for it); else the store at
    `tuning.store_url`, or None when it cannot be opened (logged: the service then answers without it)."""
    from optserve.tuning.store import TuningStoreError, open_store

    if tuning.profile is not None:
        return open_store(f"profile:{tuning.profile}", read_only=True)
    try:
        return open_store(tuning.store_url, max_recorded_bytes=tuning.max_recorded_mb * 2**20)
    except TuningStoreError as err:
        logger.warning("no tuning store: %s", err)
        return None
