"""optcc's resident server: a zygote that has imported everything optcc needs once, and forks a child per
command (as sccache's server, or multiprocessing's forkserver), so that a command costs a bare Python start
(the thin client, resident_client.py) plus its real work, not the imports (grpc, protobuf, the generated
stubs, pydantic, optcc's modules: most of a fresh optcc's own time) and the interpreter's start each time.

The parent imports, then listens; it never creates a gRPC channel or a thread (a forked child of a process
with either inherits locks held by threads that do not exist in it). It checks that it has one thread
before it serves. Each child makes its own channel, as a fresh optcc process does (cheap next to the
imports, docs/clients.md); so gRPC's fork support (GRPC_ENABLE_FORK_SUPPORT, for processes that fork with live
channels) is not needed and the environment's value is left as it is.

Per request (the frame of resident_wire.py) the parent checks the caller's uid (SO_PEERCRED: only this user is
served), reads the request, hands it with the client's descriptors to the spare child it forked ahead while no
request was open (over a socket pair: a unit does not wait for a fork; without a spare it forks one for it)
and closes its copies of the client's descriptors; the child becomes the client's command: its own process
group (the client forwards Ctrl-C and other signals to it), the client's working folder, environment, umask,
niceness and stdin/stdout/stderr, then optcc.main(argv) or optcc.main_cxx(argv), the function the in-process
optcc runs, with one difference: a command optcc hands to clang unchanged is run and waited for instead of
exec'd (spawn.RESIDENT), so that its status can be sent back. It sends its pid first, then the exit status,
and exits. The parent reaps children, and exits after OPTCC_RESIDENT_IDLE seconds without a request (or on
`optcc --stop-server`, SIGTERM, or when its socket is removed or taken by another server, or the files of the
modules it loaded change), removing its socket if it is still its own.

Run as `python -P -m optserve.clients.resident_server --socket PATH --key KEY --idle SECONDS` (the thin
client starts it, detached, its output to the log beside the socket).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import select
import signal
import socket
import sys
import time
import traceback
from pathlib import Path

from optserve.clients import resident_wire as wire

# Everything optcc may import while it serves a command: with these loaded, a child imports nothing.
PRELOADED = (
    "optserve.clients.optcc",
    "optserve.clients.command_line",
    "optserve.clients.settings",
    "optserve.clients.takeover",
    "optserve.clients.compile_modes",
    "optserve.clients.service_answer",
    "optserve.clients.object_choice",
    "optserve.clients.unit_report",
    "optserve.clients.object_cache",
    "optserve.clients.object_trust",
    "optserve.clients.service_call",
    "optserve.clients.channel_policy",
    "optserve.clients.build_state",
    "optserve.clients.stats",
    "optserve.clients.capture",
    "optserve.clients.elf",
    "optserve.clients.files",
    "optserve.clients.spawn",
    # the object cache asks the service's model through the full client (pydantic)
    "optserve.clients.python.client",
    "optserve.clients.python.requests",
    "optserve.v1.optserve_pb2",
    "grpc",
    "grpc._channel",  # loaded by a first channel (~13 ms a child would pay per unit), threads none
    "grpc._simple_stubs",
    "grpc.experimental",
    "elftools.elf.elffile",
    "elftools.common.exceptions",
    "elftools.elf.dynamic",  # what a first ELFFile loads lazily (~20 ms a child would pay per unit)
    "elftools.elf.gnuversions",
    "elftools.elf.hash",
    "elftools.elf.notes",
    "elftools.elf.relocation",
    "elftools.elf.sections",
    "elftools.elf.segments",
    "optserve.clients.baseline_memo",
    "optserve.clients.bitcode_tap",
    "subprocess",
    "threading",
    "tempfile",
    "shutil",
    "hashlib",
    "json",
    "traceback",
)
ACCEPT_TIMEOUT_S = 2.0  # a connected client sends its whole request at once
STARTED_AHEAD_S = 5.0  # a `.starting` marker this much older than the server's start is another's
LOOP_WAKE_S = 60.0  # idle, the parent still wakes this often to see whether its socket is still its own


def preload() -> None:
    """Import PRELOADED; one that fails (a module moved, an optional package missing) is said in the log
    and left to the children, which import it as the in-process optcc would."""
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception as err:
            print(f"optcc server: {name} not preloaded: {err!r}", flush=True)


def threads() -> int:
    """This process's threads, as the kernel counts them (gRPC's own would not show in `threading`)."""
    return len(os.listdir("/proc/self/task"))


class SourceWatch:
    """The files of the optserve modules this process loaded, with their size and mtime: `changed()` once
    any differs (a server must not answer with code that is no longer the install's)."""

    def __init__(self):
        self.files = {}
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if path and module.__name__.startswith("optserve"):
                self.files[path] = self._stamp(path)

    @staticmethod
    def _stamp(path: str):
        try:
            info = os.stat(path)
        except OSError:
            return None
        return info.st_size, info.st_mtime_ns

    def changed(self) -> bool:
        return any(self._stamp(path) != stamp for path, stamp in self.files.items())


class Server:
    """The listening zygote (one per user and install); `serve()` until idle, stopped or replaced."""

    def __init__(self, socket_path: str, key: str, idle_s: float):
        self.socket_path, self.key, self.idle_s = socket_path, key, idle_s
        self.children: set[int] = set()
        # a child forked ahead, waiting for the next `run` request on its end of a socket pair: a unit does
        # not wait for the fork (`spare`)
        self.spare: tuple[int, socket.socket] | None = None
        self.listener: socket.socket | None = None
        self.inode: int | None = None
        self.watch = SourceWatch()
        self.last_request = time.monotonic()
        self.stopping = ""

    def listen(self) -> None:
        """Bind a temporary name, listen, then rename it over the socket's name: a client never connects to
        a socket that is not listening yet, and a dead server's socket or a stray file is replaced."""
        staging = f"{self.socket_path}.{os.getpid()}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging)
        listener.bind(staging)
        os.chmod(staging, 0o600)
        listener.listen(128)
        os.rename(staging, self.socket_path)
        self.listener, self.inode = listener, os.stat(self.socket_path).st_ino

    def still_mine(self) -> bool:
        try:
            return os.stat(self.socket_path).st_ino == self.inode
        except OSError:
            return False

    def serve(self) -> None:
        while not self.stopping:
            self.reap()
            if not self.still_mine():
                self.stopping = "its socket was removed or taken by another server"
                break
            idle_for = time.monotonic() - self.last_request
            if not self.children and idle_for >= self.idle_s:
                self.stopping = f"idle for {idle_for:.0f} s"
                break
            if self.spare is None:
                self.fork_spare()
            wait_s = 1.0 if self.children else min(self.idle_s - idle_for, LOOP_WAKE_S)
            readable, _, _ = select.select([self.listener], [], [], max(wait_s, 0.0))
            if readable:
                self.accept()

    def accept(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        with connection:
            self.last_request = time.monotonic()
            if wire.peer_uid(connection) != os.getuid():  # only this user's commands
                return
            connection.settimeout(ACCEPT_TIMEOUT_S)
            try:
                fields, fds = self.read_request(connection)
            except wire.OtherProtocol as err:  # a client of another protocol (a stale native client)
                print(f"optcc server: {err}: the client runs it itself", flush=True)
                with contextlib.suppress(OSError):
                    connection.sendall(wire.record(wire.FALL_BACK, 0))
                return
            except (OSError, ValueError) as err:
                print(f"optcc server: a request could not be read: {err!r}", flush=True)
                return
            try:
                self.answer(connection, fields, fds)
            finally:
                for fd in fds:  # the child has its copies; the client's pipes must close when it exits
                    os.close(fd)

    @staticmethod
    def read_request(connection: socket.socket) -> tuple[list[bytes], list[int]]:
        data, fds, _, _ = socket.recv_fds(connection, 1 << 16, wire.RUN_FDS, socket.MSG_CMSG_CLOEXEC)
        try:
            while len(data) < wire.FRAME.size:
                data += connection.recv(1 << 16) or _closed()
            (length,) = wire.FRAME.unpack_from(data)
            if length > wire.MAX_FRAME_BYTES:
                raise ValueError(f"a request of {length} bytes")
            while len(data) < wire.FRAME.size + length:
                data += connection.recv(1 << 20) or _closed()
            fields = wire.fields_of(data[wire.FRAME.size :])
            if len(fields) < 2:
                raise ValueError("a request without its key and kind")
            return fields, fds
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    def answer(self, connection: socket.socket, fields: list[bytes], fds: list[int]) -> None:
        key, kind = fields[0].decode(), fields[1]
        if kind == b"stop":
            self.stopping = "asked to stop (optcc --stop-server)"
            connection.sendall(wire.record(wire.SERVER, os.getpid()))
            return
        if key != self.key or self.watch.changed():  # not this install's code (any more): in-process
            connection.sendall(wire.record(wire.FALL_BACK, 0))
            if key == self.key:
                self.stopping = "the files of its modules changed"
            return
        if kind == b"ping":
            connection.sendall(wire.record(wire.SERVER, os.getpid()))
            return
        if kind == b"warm":  # the client does not wait for it: answered before the child starts
            connection.sendall(wire.record(wire.SERVER, os.getpid()))
            self.fork(lambda: _warm(fields[2:]))
            return
        if kind != b"run" or len(fds) != wire.RUN_FDS:
            connection.sendall(wire.record(wire.FALL_BACK, 0))
            return
        if not self.hand_to_spare(connection, fields[2:], fds):
            self.fork(lambda: _child(connection, fields[2:], fds))

    def fork_spare(self) -> None:
        """Fork the child that serves the next `run` request, while no request is open (it must hold no
        client's descriptors). It waits on its end of a socket pair (`_spare`); the server's end closing
        (the server exits, however) ends it."""
        ours, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:  # whatever happens here, the child never returns into the server's loop
                self.listener.close()
                ours.close()
                _spare(its)
            finally:
                os._exit(1)
        its.close()
        self.spare = (pid, ours)

    def hand_to_spare(self, connection: socket.socket, fields: list[bytes], fds: list[int]) -> bool:
        """Give the request to the spare child (its fields, and the connection and the client's descriptors
        over SCM_RIGHTS); False if there is none or it is gone (the request is then forked for)."""
        if self.spare is None:
            return False
        pid, channel = self.spare
        self.spare = None
        body = b"\0".join(fields)
        try:
            with channel:
                socket.send_fds(channel, [wire.FRAME.pack(len(body))], [connection.fileno(), *fds])
                channel.sendall(body)
        except OSError:
            return False
        self.children.add(pid)
        return True

    def fork(self, work) -> None:
        """Run `work()` in a child of this process, which then exits."""
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:  # whatever happens here, the child never returns into the server's loop
                self.listener.close()
                work()
            finally:
                os._exit(1)
        self.children.add(pid)

    def reap(self) -> None:
        while self.children or self.spare is not None:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            if self.spare is not None and self.spare[0] == pid:  # gone before it had work
                self.spare[1].close()
                self.spare = None

    def close(self) -> None:
        if self.spare is not None:  # its end of the pair reads the end: it exits
            self.spare[1].close()
            self.spare = None
        if self.listener is not None:
            if self.still_mine():
                with contextlib.suppress(OSError):
                    os.unlink(self.socket_path)
            self.listener.close()


class _Stop(BaseException):
    """SIGTERM or SIGHUP in the parent: leave the loop, remove the socket."""


def _closed():
    raise ValueError("the client closed the connection mid-request")


def _spare(channel: socket.socket) -> None:
    """The spare child (Server.fork_spare): wait for a request from the server, then serve it as a child
    forked for it would (`_child`); exit when the server's end closes first."""
    data, fds, _, _ = socket.recv_fds(channel, wire.FRAME.size, wire.RUN_FDS + 1, socket.MSG_CMSG_CLOEXEC)
    if len(data) < wire.FRAME.size:
        os._exit(0)  # the server ended, or stopped: no request came
    (length,) = wire.FRAME.unpack(data)
    body = b""
    while len(body) < length:
        chunk = channel.recv(min(length - len(body), 1 << 20))
        if not chunk:
            os._exit(0)
        body += chunk
    channel.close()
    connection = socket.socket(fileno=fds[0])
    _child(connection, body.split(b"\0"), fds[1:])


def _child(connection: socket.socket, fields: list[bytes], fds: list[int]) -> None:
    """The forked child: become the client's command, run optcc's main, send its status, exit."""
    status = 1
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh interpreter
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        connection.settimeout(None)
        connection.sendall(wire.record(wire.CHILD, os.getpid()))
        run = _become_client(fields, fds)
    except Exception as err:  # nothing of the command has run: the client runs it in-process
        try:
            connection.sendall(wire.record(wire.FALL_BACK, 0))
        finally:
            print(f"optcc server: a request fell back: {err!r}", file=sys.__stderr__, flush=True)
            os._exit(0)
    try:
        status = run()
    except SystemExit as done:  # as the interpreter turns sys.exit() into a status
        status = _exit_status(done.code)
    except KeyboardInterrupt:  # as the interpreter ends on one: the traceback, then death by SIGINT
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    _release_stdio()  # the client's pipes are not held open after it has its status
    try:
        connection.sendall(wire.record(wire.STATUS, status))
    finally:
        os._exit(0)


def _warm(environment: list[bytes] | None) -> None:
    """The forked child of a `warm` request (a build system's compiler identification, resident_client.py),
    or of a server started ahead for one: with the build's environment (the request's; None: this
    process's, which the client that started it handed down), bring the object cache's note of the
    service's model up to date (object_cache.known_model: a gRPC call when the note is older than
    MODEL_CHECK_S), so that the build's first units find it noted instead of each asking the service
    before its clang starts (a channel and a call). Nothing is said; a failure leaves the note as it was."""
    try:
        if environment is not None:
            _take_environment(environment)
        from optserve.clients import object_cache
        from optserve.clients.settings import OptccSettings
        from optserve.clients.spawn import compiler

        settings = OptccSettings.from_environment(dict(os.environ), compiler(cxx=False))
        if settings.cache_dir is not None:
            object_cache.known_model(Path(settings.cache_dir), settings.server, settings.retry_s)
    finally:
        os._exit(0)


def _take_environment(environment: list[bytes]) -> None:
    """This process's environment becomes the client's `NAME=value` items."""
    os.environ.clear()
    for item in environment:
        name, _, value = item.partition(b"=")
        if name:
            os.environb[name] = value
    import tempfile

    tempfile.tempdir = None  # gettempdir() caches $TMPDIR: the client's, from now on


def _become_client(fields: list[bytes], fds: list[int]):
    """Take the client's folder, environment, umask, niceness and stdio; the call that runs its command."""
    driver, argv0, started, group, umask, niceness, count = fields[:7]
    arguments = [os.fsdecode(a) for a in fields[7 : 7 + int(count)]]
    environment = fields[7 + int(count) :]
    os.fchdir(fds[3])
    _take_environment(environment)
    os.umask(int(umask))
    raise_by = int(niceness) - os.getpriority(os.PRIO_PROCESS, 0)
    if raise_by > 0:  # `nice make`: its compiles are as nice (only ever nicer: no privilege needed)
        os.nice(raise_by)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    _reopen_stdio()
    sys.argv = [os.fsdecode(argv0), *arguments]
    from optserve.clients import build_state, optcc

    build_state.GROUP = int(group)  # the build is the client's process group, not this child's
    optcc.STARTED = float(started)  # the unit's `before_s` counts from the client's start
    main = optcc.main_cxx if driver == b"c++" else optcc.main
    return lambda: main(arguments)


def _reopen_stdio() -> None:
    """sys.stdin/stdout/stderr over the new descriptors 0-2, buffered as Python buffers them: line-buffered
    to a terminal (stderr always), block-buffered otherwise."""
    like = sys.__stdout__
    encoding, errors = getattr(like, "encoding", "utf-8"), getattr(like, "errors", "strict")
    streams = []
    for fd, mode in ((0, "rb"), (1, "wb"), (2, "wb")):
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = io.BufferedReader(raw) if mode == "rb" else io.BufferedWriter(raw)
        line = fd == 2 or raw.isatty()
        streams.append(
            io.TextIOWrapper(
                buffered,
                encoding=encoding,
                errors="backslashreplace" if fd == 2 else errors,
                line_buffering=line,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams


def _release_stdio() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _started_ahead(socket_path: str, started_wall: float) -> bool:
    """Whether a client started this server ahead of a build (resident_link.prestart touches the `.starting`
    marker, resident_wire.Paths, right before it starts the server)."""
    marker = socket_path.removesuffix(".sock") + ".starting"
    try:
        return os.stat(marker).st_mtime >= started_wall - STARTED_AHEAD_S
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="optcc-server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--idle", type=float, required=True, help="seconds without a request before it exits")
    options = parser.parse_args(argv)
    os.chdir("/")  # never hold a build's folder
    started, started_wall = time.monotonic(), time.time()
    preload()
    from optserve.clients import spawn

    spawn.RESIDENT = True  # its children report a handed-over command's status instead of exec'ing it
    gc.collect()
    gc.freeze()  # the imports' objects: children's collections leave their pages shared
    running = threads()
    if running != 1:
        print(f"optcc server: {running} threads after the imports: not fork-safe, not serving", flush=True)
        return 1
    server = Server(options.socket, options.key, options.idle)

    def stop(signum, _frame):
        server.stopping = f"signal {signum}"
        raise _Stop

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        server.listen()
        if _started_ahead(options.socket, started_wall):  # configure is running: its build follows
            server.fork(lambda: _warm(None))
        imports_s = time.monotonic() - started
        print(
            f"optcc server {os.getpid()}: {options.key} at {options.socket}, imports {imports_s:.2f} s, "
            f"idle limit {options.idle:g} s",
            flush=True,
        )
        server.serve()
    except _Stop:
        pass
    finally:
        server.close()
        print(f"optcc server {os.getpid()}: exits ({server.stopping or 'an error'})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
