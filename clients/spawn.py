"""Run one program and wait for it, its stderr kept in a file: all optcc needs for a unit's single clang
compile, without importing `subprocess` (with `threading`, `selectors`, `signal`: ~5-7 ms of every unit's
start; docs/bench/clients.md, run 12). Standard library `os` (and `select` for a wait with a time limit)."""

from __future__ import annotations

import os
import time


def start(argv: list[str], stderr_path: str) -> int:
    """Start `argv` (its program looked up on PATH) with stdin from /dev/null and stderr written to
    `stderr_path`; its process id. Raises OSError when the program cannot be started."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    return os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)


def wait(pid: int, timeout_s: float | None = None) -> int | None:
    """The exit status of process `pid` as `subprocess` gives it (negative: killed by that signal), or None
    if it is still running after `timeout_s` (None: wait for as long as it runs)."""
    if timeout_s is not None and not _ended_within(pid, max(0.0, timeout_s)):
        return None
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run(argv: list[str], stderr_path: str) -> int:
    """`start` then `wait` for its end."""
    return wait(start(argv, stderr_path))


def _ended_within(pid: int, timeout_s: float) -> bool:
    """Whether `pid` ends within `timeout_s`, without reaping it: a pidfd readable at its end (Linux), else
    polling every 2 ms."""
    try:
        descriptor = os.pidfd_open(pid)
    except (AttributeError, OSError):
        end = time.monotonic() + timeout_s
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() >= end:
                return False
            time.sleep(0.002)
        return True
    import select

    try:
        ready, _, _ = select.select([descriptor], [], [], timeout_s)
    finally:
        os.close(descriptor)
    return bool(ready)
