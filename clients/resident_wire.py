"""What optcc's thin client (resident_client.py) and its resident server (resident_server.py) share: where the
server listens, which server a client may use, and the bytes between them. Standard library only, and only
its light modules: the thin client imports this on every command.

Where: one private folder per user (settings.ResidentSettings.folder, mode 0700, owned by the user: checked,
never trusted); in it, per install, `optcc-<version>-<digest>.sock` (the server's socket), `.lock` (held
while a client starts the server, so a `make -j` starts one) and `.log` (the server's output). The digest
covers the interpreter and the source of every module in clients/: a server started from other code has
another name and is never used (the server also checks, per request, that the files of the modules it
loaded are unchanged).

Bytes, client to server: one frame, `!I` length then fields joined by NUL (argv, environment and paths are
POSIX byte strings, which hold no NUL): MAGIC, the install key, the kind (`run`, `stop`, `ping`, `warm`), for
`warm` the environment's `NAME=value` items (resident_server._warm), for `run` the driver (`c` or `c++`),
argv[0], when the client started (time.monotonic, the same clock in every process), its process group, umask
and niceness, the number of arguments, the arguments, and the environment's `NAME=value` items. A `run` frame
carries the client's descriptors 0, 1, 2 and its working folder (SCM_RIGHTS), in that order. Server to client:
records of one byte and a signed 32-bit number (`P`: the child serving the request, its pid and process group;
`X`: its exit status; `F`: run in-process instead; `S`: the server's pid, answering `stop`, `ping` and
`warm`). MAGIC carries the protocol's version: a server answers `F` to a request of another version (a native
client built from older code, thin_client.c), whose client then runs the command through the Python client.
"""

from __future__ import annotations

import os
import socket
import struct
import sys

MAGIC = b"optcc-resident-1"
FRAME = struct.Struct("!I")
RECORD = struct.Struct("!ci")
MAX_FRAME_BYTES = 16 << 20  # argv and environment: Linux allows 2 MiB to exec; generous
RUN_FDS = 4  # stdin, stdout, stderr, the working folder
SOCKET_PATH_MAX = 107  # sockaddr_un's sun_path, less its NUL
CHILD, STATUS, FALL_BACK, SERVER = b"P", b"X", b"F", b"S"
_CLIENTS = os.path.dirname(os.path.abspath(__file__))


class Unsafe(Exception):
    """The resident folder is not the user's private folder: no server is used (optcc runs in-process)."""


def install_key() -> str:
    """`<version>-<digest>`: the package version, and a CRC-32 of this interpreter's path and the source
    of every module in clients/ (about 0.3 ms to read). Changing any of them names another server."""
    import zlib

    from optserve import __version__

    digest = zlib.crc32(os.fsencode(sys.executable))
    for name in sorted(os.listdir(_CLIENTS)):
        if name.endswith(".py"):
            with open(os.path.join(_CLIENTS, name), "rb") as source:
                digest = zlib.crc32(name.encode() + b"\0" + source.read(), digest)
    return f"{__version__}-{digest:08x}"


class Paths:
    """The socket, lock and log of the server for `key` in `folder`, and `failed`: a file touched when the
    server exited before it listened (clients then run in-process for a while instead of each trying);
    `starting`: a file touched when a server was started ahead (resident_link.prestart)."""

    def __init__(self, folder: str, key: str):
        stem = os.path.join(folder, f"optcc-{key}")
        self.folder, self.key = folder, key
        self.socket, self.lock, self.log = stem + ".sock", stem + ".lock", stem + ".log"
        self.failed = stem + ".failed"
        self.starting = stem + ".starting"  # touched when a client started a server without waiting


def private_folder(folder: str) -> str:
    """`folder`, created 0700 if missing; Unsafe unless it is a real folder (not a link) owned by this user
    that no one else may enter or write: whoever can write there could put their own socket in place."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError as err:
        raise Unsafe(f"cannot create {folder}: {err}") from None
    if not (info.st_mode & 0o170000 == 0o040000):
        raise Unsafe(f"{folder} is not a folder")
    if info.st_uid != os.getuid():
        raise Unsafe(f"{folder} belongs to uid {info.st_uid}, not to this user ({os.getuid()})")
    if info.st_mode & 0o077:
        raise Unsafe(f"{folder} is open to others (mode {info.st_mode & 0o777:o}; it must be 700)")
    return folder


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED: the kernel's word)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[1]


def frame(fields: list[bytes]) -> bytes:
    body = b"\0".join([MAGIC, *fields])
    return FRAME.pack(len(body)) + body


class OtherProtocol(ValueError):
    """A request of another version of this protocol (MAGIC's `-N`): its client runs the command itself."""


def fields_of(body: bytes) -> list[bytes]:
    """The fields of a frame's body after MAGIC; OtherProtocol for another version of this protocol (a
    stale native client: thin_client.c keeps its own copy of MAGIC), ValueError if it is not one of ours."""
    fields = body.split(b"\0")
    if fields[0] != MAGIC:
        if fields[0].startswith(MAGIC.rpartition(b"-")[0] + b"-"):
            seen = fields[0].decode(errors="replace")
            raise OtherProtocol(f"a request of protocol {seen}, not {MAGIC.decode()}")
        raise ValueError("not an optcc resident request")
    return fields[1:]


def record(kind: bytes, number: int) -> bytes:
    return RECORD.pack(kind, number)


def read_record(connection: socket.socket) -> tuple[bytes, int] | None:
    """The next record, or None at the end of the connection (the other side is gone)."""
    data = b""
    while len(data) < RECORD.size:
        chunk = connection.recv(RECORD.size - len(data))
        if not chunk:
            return None
        data += chunk
    return RECORD.unpack(data)
