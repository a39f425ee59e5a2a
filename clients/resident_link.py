"""The thin client's side of the link to optcc's resident server (resident_server.py): find this user's
server for this install, start it if none listens, send it a command with the client's stdio, and wait
for the command's exit status, passing signals on. Standard library only, light modules only (socket,
struct, fcntl and signal where needed): loaded by resident_client.py for each unit it sends.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time

from optserve.clients import resident_wire as wire
from optserve.clients import spawn
from optserve.clients.settings import ConfigError, ResidentSettings

START_WAIT_S = 5.0  # a server's start (its imports) takes ~0.5 s here; a loaded machine may take longer
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
LOG_LIMIT_BYTES = 1 << 20  # the server's log is started afresh beyond this
RETRY_START_S = 60.0  # after a server exited before it listened, clients run in-process this long


def _verbose(message: str) -> None:
    if os.environ.get("OPTCC_VERBOSE", "") not in ("", "0"):
        print(f"optcc: {message}", file=sys.stderr)


def _paths(settings: ResidentSettings) -> wire.Paths:
    if settings.folder is None:
        raise wire.Unsafe("no folder for the resident server (no HOME, no XDG_RUNTIME_DIR)")
    paths = wire.Paths(wire.private_folder(settings.folder), wire.install_key())
    if len(os.fsencode(paths.socket)) > wire.SOCKET_PATH_MAX:
        raise wire.Unsafe(f"{paths.socket} is too long for a Unix socket: set a shorter OPTCC_RESIDENT_DIR")
    return paths


def served(driver: str, arguments: list[str], started: float) -> int | None:
    """The command's exit status from the resident server; None to run it in-process instead."""
    try:
        settings = ResidentSettings.from_environment(os.environ)
    except ConfigError as err:
        print(f"optcc: {err}; running in-process", file=sys.stderr)
        return None
    if not settings.enabled:
        return None
    if sys.argv[0].endswith("-py"):  # the installed optcc's Python client (clients/sh-scripts/optcc)
        from optserve.clients import native_client

        native_client.ensure(os.environ, os.path.dirname(sys.argv[0]))
    try:
        for fd in (0, 1, 2):  # a closed stdio descriptor cannot be passed on: keep the command here
            os.fstat(fd)
        paths = _paths(settings)
        connection = _connect(paths.socket) or _start(paths, settings)
        if connection is None:
            _verbose(f"no resident server at {paths.socket} (its log: {paths.log}); running in-process")
            return None
        with connection:
            return _run(connection, paths.key, driver, arguments, started)
    except (OSError, wire.Unsafe) as err:
        _verbose(f"resident server not used: {err}; running in-process")
        return None


def _run(
    connection: socket.socket, key: str, driver: str, arguments: list[str], client_started: float
) -> int | None:
    """Send the command, wait for its status (passing signals on); None if the server gave none."""
    umask = os.umask(0o22)
    os.umask(umask)
    fields = [
        key.encode(),
        b"run",
        driver.encode(),
        os.fsencode(sys.argv[0]),
        repr(client_started).encode(),
        str(os.getpgrp()).encode(),
        str(umask).encode(),
        str(os.getpriority(os.PRIO_PROCESS, 0)).encode(),
        str(len(arguments)).encode(),
        *map(os.fsencode, arguments),
        *(name + b"=" + value for name, value in os.environb.items()),
    ]
    data = wire.frame(fields)
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sent = socket.send_fds(connection, [data], [0, 1, 2, here])
    finally:
        os.close(here)
    if sent < len(data):
        connection.sendall(data[sent:])
    started = wire.read_record(connection)
    if started is None or started[0] != wire.CHILD:
        return None  # stale, refused or gone before it began: nothing of the command ran
    import signal

    received: list[int] = []

    def forward(signum, _frame):
        received.append(signum)
        with contextlib.suppress(OSError):  # it has ended already
            os.killpg(started[1], signum)

    for name in FORWARDED:
        signal.signal(getattr(signal, name), forward)
    done = wire.read_record(connection)
    if done is None and received:  # the child died of the signal the build sent: so does this process
        signal.signal(received[-1], signal.SIG_DFL)
        os.kill(os.getpid(), received[-1])
        return 128 + received[-1]
    if done is None or done[0] != wire.STATUS:
        _verbose("the resident server's child ended without a status; running in-process")
        return None
    return done[1]


def _connect(path: str) -> socket.socket | None:
    """A connection to this user's server at `path`, or None if none listens there."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        connection.connect(path)
        if wire.peer_uid(connection) == os.getuid():
            return connection
    except OSError:
        pass
    connection.close()
    return None


def prestart() -> None:
    """Start this user's server for this install in the background when none listens, without waiting for
    it. Called for a build system's compiler identification (`--version`, `-v`: configure, meson), so that
    the build's first units find a server ready instead of each waiting for its imports. Never an error:
    on any problem the command goes on as it would have."""
    try:
        settings = ResidentSettings.from_environment(os.environ)
        if not settings.enabled:
            return
        paths = _paths(settings)
        now = time.time()
        for marker, fresh_s in (
            (paths.socket, None),
            (paths.starting, START_WAIT_S),
            (paths.failed, RETRY_START_S),
        ):
            with contextlib.suppress(OSError):
                age_s = now - os.stat(marker).st_mtime  # none: OSError, the next marker
                if fresh_s is None or age_s < fresh_s:
                    return  # a server listens, is starting, or failed to start a moment ago
        with open(paths.starting, "w"):
            pass
        _spawn_server(paths, settings)
    except (OSError, ConfigError, wire.Unsafe) as err:
        _verbose(f"resident server not started ahead: {err}")


def _start(paths: wire.Paths, settings: ResidentSettings) -> socket.socket | None:
    """Start the server (unless another client is starting it) and connect to it; None if it did not come
    up within START_WAIT_S."""
    import fcntl

    deadline = time.monotonic() + START_WAIT_S
    lock = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # another client is starting it: use it once it listens
                connection = _connect(paths.socket)
                if connection is not None:
                    return connection
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.01)
        connection = _connect(paths.socket)  # started while this client waited for the lock
        if connection is not None:
            return connection
        try:
            if time.time() - os.stat(paths.failed).st_mtime < RETRY_START_S:
                return None  # it failed to start a moment ago: not every unit pays for trying again
        except OSError:
            pass
        try:  # one started ahead (`prestart`) and still importing: wait for it rather than start another
            ahead = time.time() - os.stat(paths.starting).st_mtime < START_WAIT_S
        except OSError:
            ahead = False
        if ahead:
            while time.monotonic() < deadline:
                connection = _connect(paths.socket)
                if connection is not None:
                    return connection
                time.sleep(0.005)
            return None
        server = _spawn_server(paths, settings)
        while time.monotonic() < deadline:
            connection = _connect(paths.socket)
            if connection is not None:
                return connection
            if os.waitpid(server, os.WNOHANG)[0]:  # it exited: its log says why
                with open(paths.failed, "w"):
                    pass
                return None
            time.sleep(0.005)
        return None
    finally:
        os.close(lock)  # and with it the lock


def _spawn_server(paths: wire.Paths, settings: ResidentSettings) -> int:
    """The server's pid: `python -P -m optserve.clients.resident_server` in a process group of its own (a
    build's Ctrl-C, sent to the terminal's foreground group, does not reach it), stdin from /dev/null, output
    to its log. -P: the build's folder is not on its import path. It stays in the build's session: with the
    kernel's autogroups (one scheduling group per session), a server in a session of its own had its
    children's clang get a share of their own, ~30% slower than the build's on the loaded 2-core machine
    (docs/clients.md)."""
    try:
        truncate = os.stat(paths.log).st_size > LOG_LIMIT_BYTES
    except OSError:
        truncate = False
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
    log = os.open(paths.log, flags, 0o600)
    command = [
        sys.executable,
        "-P",
        "-m",
        "optserve.clients.resident_server",
        "--socket",
        paths.socket,
        "--key",
        paths.key,
        "--idle",
        repr(settings.idle_s),
    ]
    try:  # nothing else the build handed this command stays open for the server's lifetime
        return spawn.detached(command, log, setpgroup=0)
    finally:
        os.close(log)


def control(flag: str) -> int:
    """`--start-server` / `--stop-server`: this user's server for this install."""
    try:
        settings = ResidentSettings.from_environment(os.environ)
        paths = _paths(settings)
    except (ConfigError, wire.Unsafe) as err:
        print(f"optcc: {err}", file=sys.stderr)
        return 1
    if flag == "--stop-server":  # every server in the folder: this install's and those of older code
        stopped = 0
        for name in sorted(os.listdir(paths.folder)):
            if name.startswith("optcc-") and name.endswith(".sock"):
                connection = _connect(os.path.join(paths.folder, name))
                answer = None if connection is None else _ask(connection, paths.key, b"stop")
                if answer is not None:
                    print(f"optcc: stopped the resident server (pid {answer}) at {paths.folder}/{name}")
                    stopped += 1
        if not stopped:
            print(f"optcc: no resident server in {paths.folder}")
        return 0
    connection = _connect(paths.socket) or _start(paths, settings)
    answer = None if connection is None else _ask(connection, paths.key, b"ping")
    if answer is None:
        print(f"optcc: the resident server did not start; its log: {paths.log}", file=sys.stderr)
        return 1
    print(f"optcc: resident server (pid {answer}) at {paths.socket}; its log: {paths.log}")
    return 0


def _ask(connection: socket.socket, key: str, kind: bytes) -> int | None:
    """The server's pid, answering `kind` (ping, stop); None if it did not answer so."""
    with connection:
        connection.sendall(wire.frame([key.encode(), kind]))
        answer = wire.read_record(connection)
    return answer[1] if answer is not None and answer[0] == wire.SERVER else None
