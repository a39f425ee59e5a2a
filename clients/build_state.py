"""What one build remembers across optcc processes: whether the fallback notice was shown, and whether the
service was found unreachable (so later translation units skip it instead of each waiting for it).

A build is the process group optcc runs in: `make` started from a shell and every compiler it runs share
one group. The state is a marker file `$TMPDIR/optcc-<uid>/fallback-<pgid>-<leader start>` (default TMPDIR
/tmp): group ids are reused within minutes on a busy machine, so the group leader's start time (from /proc)
tells two builds with one id apart. Markers older than `STALE_S` are ignored too.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

STALE_S = 3600.0
UNREACHABLE = "unreachable"
# The build's process group when it is not this process's own: a resident server's child
# (resident_server.py) runs in a group of its own and sets its client's here.
GROUP: int | None = None


def _build_id() -> str:
    """This process group's id and its leader's start time (clock ticks since boot), or the id alone."""
    group = os.getpgrp() if GROUP is None else GROUP
    try:
        # Fields after the command name (which may hold spaces) start at field 3; starttime is field 22.
        start = Path(f"/proc/{group}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return str(group)
    return f"{group}-{start}"


def _marker() -> Path:
    return Path(tempfile.gettempdir()) / f"optcc-{os.getuid()}" / f"fallback-{_build_id()}"


def _fresh_marker() -> Path | None:
    marker = _marker()
    try:
        if time.time() - marker.stat().st_mtime < STALE_S:
            return marker
    except OSError:
        pass
    return None


def first_fallback(unreachable: bool) -> bool:
    """Record a fallback of this build; True for the first one (the caller shows the notice then)."""
    marker = _marker()
    first = _fresh_marker() is None
    try:
        marker.parent.mkdir(mode=0o700, exist_ok=True)
        if first or unreachable:
            marker.write_text(UNREACHABLE if unreachable else "")
    except OSError:
        return True  # no state to keep: better a repeated notice than none
    return first


def service_unreachable_since(retry_s: float) -> bool:
    """True if this build found the service unreachable less than `retry_s` seconds ago."""
    marker = _fresh_marker()
    try:
        return (
            marker is not None
            and time.time() - marker.stat().st_mtime < retry_s
            and marker.read_text() == UNREACHABLE
        )
    except OSError:
        return False
