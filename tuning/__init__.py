"""The tuning store: the best pass lists found so far per function and per whole unit, the units recorded for
tuning, and tuning profiles (records, keys, store, profile; backends in sqlite_store and postgres_store)."""

from optserve.tuning.base import TuningStore, TuningStoreError
from optserve.tuning.keys import current_toolchain, ir_hash
from optserve.tuning.profile import export_profile, import_profile, read_profile
from optserve.tuning.records import RecordedUnit, StoreStats, Toolchain, TunedList
from optserve.tuning.store import default_store_path, open_store

__all__ = [
    "RecordedUnit",
    "StoreStats",
    "Toolchain",
    "TunedList",
    "TuningStore",
    "TuningStoreError",
    "current_toolchain",
    "default_store_path",
    "export_profile",
    "import_profile",
    "ir_hash",
    "open_store",
    "read_profile",
]
