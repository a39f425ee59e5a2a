"""Open a tuning store: the best pass lists found so far, per function and per unit, the recorded units,
and LoopTune's schedule decisions.

    open_store("")                          SQLite at default_store_path() (the user's cache directory)
    open_store("sqlite:///abs/path.sqlite3") or open_store("/abs/path.sqlite3")
    open_store("postgresql://user@host/db")  a server shared by a build farm or a Ray cluster
    open_store("profile:/path/profile.json") read-only, in memory: exactly one tuning profile's lists

Why PostgreSQL rather than Redis for the shared server: an offer is a conditional write, "keep the cheaper
list, add up the compiles", and PostgreSQL does it for a whole batch as one ACID statement
(`INSERT ... ON CONFLICT DO UPDATE` with the cost comparison inside), durable by default, in the same SQL as
the embedded SQLite store, so both backends share their statements and their tests. ccache and sccache use
Redis for opaque blobs keyed by a hash, where no comparison is needed and a lost write costs one recompile;
in Redis the compare-and-accumulate would be a Lua script per key, and durability a configuration choice.
"""

from __future__ import annotations

import os
from pathlib import Path

from optserve.tuning.base import TuningStore, TuningStoreError
from optserve.tuning.profile import open_profile_store
from optserve.tuning.sqlite_store import SqliteTuningStore

__all__ = [
    "TuningStore",
    "TuningStoreError",
    "default_store_path",
    "open_store",
    "DEFAULT_MAX_RECORDED_BYTES",
]

DEFAULT_MAX_RECORDED_BYTES = 2 * 1024**3
STORE_FILE = "tuning.sqlite3"


def default_store_path() -> Path:
    """$OPTSERVE_TUNING_DIR/tuning.sqlite3, else $XDG_CACHE_HOME/optserve/..., else ~/.cache/optserve/..."""
    if directory := os.environ.get("OPTSERVE_TUNING_DIR"):
        return Path(directory).expanduser() / STORE_FILE
    if cache := os.environ.get("XDG_CACHE_HOME"):
        return Path(cache).expanduser() / "optserve" / STORE_FILE
    return Path.home() / ".cache" / "optserve" / STORE_FILE


def open_store(
    url: str = "", *, max_recorded_bytes: int = DEFAULT_MAX_RECORDED_BYTES, read_only: bool = False
) -> TuningStore:
    """Open (creating where needed) the store `url` names; TuningStoreError says why one cannot be opened."""
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from optserve.tuning.postgres_store import PostgresTuningStore
        except ImportError as error:
            raise TuningStoreError(
                f"a PostgreSQL tuning store needs psycopg ({error}); install optserve[serve]"
            ) from error
        return PostgresTuningStore(url, max_recorded_bytes=max_recorded_bytes, read_only=read_only)
    if url.startswith("profile:"):
        return open_profile_store(Path(url.removeprefix("profile:")).expanduser())
    if url.startswith("sqlite://"):
        path = Path(url.removeprefix("sqlite://"))
        if not path.is_absolute():
            raise TuningStoreError(f"tuning store URL {url!r}: write sqlite:///ABSOLUTE/PATH (three slashes)")
    elif "://" in url:
        raise TuningStoreError(
            f"tuning store URL {url!r}: unknown scheme; "
            "use a path, sqlite:///PATH, postgresql://... or profile:PATH"
        )
    else:
        path = Path(url).expanduser() if url else default_store_path()
    if not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise TuningStoreError(
                f"cannot create the tuning store's directory {path.parent}: {error}"
            ) from error
    return SqliteTuningStore(path, max_recorded_bytes=max_recorded_bytes, read_only=read_only)
