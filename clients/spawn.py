"""Run one program and wait for it, its stderr kept in a file: all optcc needs for a unit's single clang
compile, without importing `subprocess` (with `threading`, `selectors`, `signal`: ~5-7 ms of every unit's
start; docs/bench/clients.md). Standard library `os` only."""

from __future__ import annotations

import os


def run(argv: list[str], stderr_path: str) -> int:
    """Run `argv` (its program looked up on PATH) with stdin from /dev/null and stderr written to
    `stderr_path`; its exit status as `subprocess` gives it (negative: killed by that signal). Raises OSError
    when the program cannot be started."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
