"""optcc's Python client (`optcc-py`, `optcc++-py` in `[project.scripts]`), which the installed `optcc` and
`optcc++` sh scripts (clients/sh-scripts/) run when no native client is built (native_client.py), and the
native client (thin_client.c, the same decisions in C) runs for anything it does not do itself: a thin
client that hands the command to optcc's resident server (resident_server.py) and exits with its status,
or runs optcc in this process as before.

A command that compiles (`-c`, or capture mode) goes to the server, whose child decides with optcc's own
rules (command_line.py) and takes the unit over or runs clang on it unchanged (a `-O2` unit, configure's
compile probes). A command that compiles nothing (linking, `-E`, `--version`) is never a unit optcc takes
over: it is exec'd here, on clang, before any of optcc is imported (spawn.py), which no server can make
cheaper. A unit then costs a bare Python start, resident_link.py's few modules (socket, struct; zlib for
the install's key: `python -X importtime` shows no `re`, grpc, protobuf, pydantic, nor optcc's compile
path) and a fork in the server, not ~0.15 s of imports per unit (docs/clients.md).

The client sends its argv, working folder, environment, umask, niceness, process group and its descriptors
0, 1 and 2 (resident_wire.py); the server's child runs optcc's own main on them and sends back the exit
status. Signals the client gets (Ctrl-C, a build's SIGTERM) are passed to the child's process group. No
server listening: the client starts one (detached, in a process group of its own; a lock so that a
`make -j` starts one) and waits for it a few seconds at most (resident_link.START_WAIT_S). Anything else
(OPTCC_RESIDENT=0, no private folder, a server that cannot start, a server or child that dies before sending
a status) and optcc runs here, in-process, exactly as without a server: a build never fails because of the
server. A unit its child had begun is then compiled again here; optcc writes its outputs atomically, so the
rerun is safe.

`optcc --start-server` starts the server and says where it listens; `optcc --stop-server` stops it (and any
other optcc server in the folder: those of code since changed, which no client uses any more).
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # the unit's `before_s` counts from here, served or not

import os  # noqa: E402
import sys  # noqa: E402

# A build system's compiler identification (autoconf's AC_PROG_CC, meson): its server is started then.
_IDENTIFICATION = frozenset({"--version", "-v", "-V", "-qversion"})
# optcc's own commands, run in this process (the server's, by the link)
_OWN = (["--stats"], ["--zero-stats"], ["--help"], ["--build-tap"])
_SERVER_CONTROL = (["--start-server"], ["--stop-server"])
WARM_ANSWER_S = 2.0  # a listening server answers a `warm` request at once


def main() -> int:
    """optcc."""
    return _command("c")


def main_cxx() -> int:
    """optcc++."""
    return _command("c++")


def _command(driver: str) -> int:
    arguments = sys.argv[1:]
    if arguments in _SERVER_CONTROL:
        from optserve.clients import resident_link

        return resident_link.control(arguments[0])
    if _IDENTIFICATION.intersection(arguments):  # configure or meson asking which compiler: a build follows
        from optserve.clients import resident_link

        resident_link.prestart()
        _warm_server()
    if arguments not in _OWN:
        if "-c" in arguments or os.environ.get("OPTCC_CAPTURE"):  # the server's child decides and does it
            from optserve.clients import resident_link

            status = resident_link.served(driver, arguments, STARTED)
            if status is not None:
                os._exit(status & 0xFF)  # as optcc's own exit: no interpreter teardown
        else:  # no -c: never a unit optcc takes over (command_line.py), clang's as given, without optcc
            from optserve.clients import spawn

            return spawn.hand_over([spawn.compiler(driver == "c++"), *arguments])
    from optserve.clients import optcc

    optcc.STARTED = STARTED
    return optcc.main_cxx() if driver == "c++" else optcc.main()  # exits, or becomes clang, itself


def _warm_server() -> None:
    """Ask the server that listens for this install to bring, with this command's environment, the object
    cache's note of the service's model up to date for the build that follows (resident_server._warm: in a
    child, so that the build's first units do not each ask the service before their clang starts). Waits
    for the server's answer only, never for the child. A server started ahead just now does it itself;
    with none listening, or any problem, nothing is done."""
    from optserve.clients import resident_link
    from optserve.clients import resident_wire as wire
    from optserve.clients.settings import ConfigError, ResidentSettings

    try:
        settings = ResidentSettings.from_environment(os.environ)
        if not settings.enabled:
            return
        paths = resident_link._paths(settings)
        connection = resident_link._connect(paths.socket)
        if connection is None:
            return
        environment = [b"%s=%s" % item for item in os.environb.items()]
        with connection:
            connection.settimeout(WARM_ANSWER_S)
            connection.sendall(wire.frame([paths.key.encode(), b"warm", *environment]))
            wire.read_record(connection)  # read, so that the server's answer never meets a closed socket
    except (OSError, ConfigError, wire.Unsafe):
        pass
