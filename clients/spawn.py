"""Run one program and wait for it, its stderr kept in a file: all optcc needs for a unit's single clang
compile, without importing `subprocess` (with `threading`, `selectors`, `signal`: ~5-7 ms of every unit's
start; docs/bench/clients.md); and hand a command to clang unchanged (`hand_over`), which the thin client
does for commands that compile nothing, before it imports any of optcc. Standard library `os` and `sys`
only."""

from __future__ import annotations

import os
import sys

# True in a resident server's child (resident_server.py), which must send the command's exit status back
# to its client: a command handed over to clang is then run and waited for, not exec'd.
RESIDENT = False


def compiler(cxx: bool) -> str:
    """The clang optcc wraps: OPTCC_CLANG (default clang-19), for optcc++ OPTCC_CLANGXX (clang++-19)."""
    if cxx:
        return os.environ.get("OPTCC_CLANGXX", "clang++-19")
    return os.environ.get("OPTCC_CLANG", "clang-19")


def hand_over(command: list[str]) -> int:
    """Become `command` (same process, so clang's exit status and signals are the build's); 127 if missing.
    In a resident server's child (RESIDENT): run it on this process's stdio and return its status (a
    signal's as the shell gives it, 128 + the signal; the thin client exits with it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if RESIDENT:
            import signal

            # Ctrl-C (forwarded to this child's group by its client) ends this process as it ends clang, as
            # if it were clang; the client then dies of the signal too
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            _, status = os.waitpid(os.posix_spawnp(command[0], command, os.environ), 0)
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code
        os.execvp(command[0], command)
    except OSError as err:
        print(f"optcc: cannot run {command[0]}: {err} (set OPTCC_CLANG or OPTCC_CLANGXX)", file=sys.stderr)
        return 127


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


def detached(command: list[str], log: int, **flags) -> int:
    """Start `command` (its program: `command[0]`) with stdin from /dev/null and stdout and stderr to the
    descriptor `log`, holding none of the other descriptors the build handed this process (a pipe someone
    reads to its end, a jobserver's) for its lifetime; `flags`: posix_spawn's (`setsid`, `setpgroup`). Its
    process id."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, log, 1),
        (os.POSIX_SPAWN_DUP2, log, 2),
    ]
    try:
        inherited = {int(fd) for fd in os.listdir("/proc/self/fd")} - {0, 1, 2, log}
    except OSError:
        inherited = set()
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in sorted(inherited) if _inheritable(fd)]
    return os.posix_spawn(command[0], command, os.environ, file_actions=actions, **flags)


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # closed meanwhile (listdir's own descriptor)
        return False
