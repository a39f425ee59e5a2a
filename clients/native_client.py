"""optcc's native thin client (thin_client.c), built once per install: the installed `optcc` and
`optcc++` (POSIX sh scripts, clients/sh-scripts/) exec it when it is built, so that a unit's command reaches
the resident server without a Python start (docs/clients.md); else they exec the Python client (`optcc-py`,
`optcc++-py`, resident_client.py), which the native client also execs on anything it does not do itself.

Where: `<OPTCC_TAP_DIR>/native<bin folder>/optcc-client`, the bin folder being the one that holds the
scripts (the script finds it from its own path with parameter expansion alone: no process started), with
`optcc-client.stamp` naming what it was built for (the version, interpreter, clients/ folder and the C
source: `stamp()`). Built by the wrapped clang (OPTCC_CLANG, default clang-19; else clang-19, else `cc`)
with those facts compiled in; a build is checked before it is put in place: the install key it computes
must be Python's (resident_wire.install_key). When no compiler can build it, a marker
(`optcc-client.<stamp>.unavailable`, with why) stops further tries for that stamp.

Built by `optcc --build-tap` (with the bitcode tap), and in the background by the Python client when it
serves a compile with the resident server on and finds none built for this install (`ensure`): the unit
does not wait. Standard library only, light imports: `ensure` runs on the Python client's path.

`python -m optserve.clients.native_client FOLDER CLANG` builds it in the foreground (FOLDER:
`native_folder`).
"""

from __future__ import annotations

import contextlib
import os
import sys

from optserve.clients import spawn

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thin_client.c")
NAME = "optcc-client"
LOCK_STALE_S = 120.0


def native_folder(env, bin_folder: str) -> str | None:
    """Where the native client for the scripts in `bin_folder` lives (what clients/sh-scripts/optcc computes):
    `<OPTCC_TAP_DIR, else $XDG_CACHE_HOME/optcc/tap, else ~/.cache/optcc/tap>/native<bin_folder>`; None
    without a home or for a relative `bin_folder`. OPTCC_TAP=0 (the bitcode tap off) does not turn it off."""
    if not os.path.isabs(bin_folder):
        return None
    if env.get("OPTCC_TAP_DIR"):
        base = env["OPTCC_TAP_DIR"]
    elif env.get("XDG_CACHE_HOME"):
        base = f"{env['XDG_CACHE_HOME']}/optcc/tap"
    elif env.get("HOME"):
        base = f"{env['HOME']}/.cache/optcc/tap"
    else:
        return None
    return f"{base}/native{bin_folder}"


def stamp() -> str:
    """What a native client is built for: the package version, this interpreter, the clients/ folder and
    the C source (CRC-32). Any change and the Python client builds it again."""
    import zlib

    from optserve import __version__

    try:
        with open(SOURCE, "rb") as source:
            code = source.read()
    except OSError:
        code = b""
    facts = "\0".join([__version__, sys.executable, os.path.dirname(SOURCE)]).encode()
    return f"{zlib.crc32(code, zlib.crc32(facts)):08x}"


def ensure(env, bin_folder: str) -> None:
    """Start a build of the native client in the background when the one for `bin_folder` is missing or
    was built for another install (and none is building, and it is not marked unavailable). Never waits,
    never an error: the unit goes on through Python."""
    folder = native_folder(env, bin_folder)
    if folder is None or not os.path.exists(SOURCE):
        return
    try:
        current = stamp()
        try:
            with open(f"{folder}/{NAME}.stamp") as built:
                if built.read().strip() == current:
                    return
        except OSError:
            pass
        if os.path.exists(f"{folder}/{NAME}.{current}.unavailable") or _locked(f"{folder}/{NAME}.lock"):
            return
        _start_build(folder, _compiler(env))
    except OSError:
        pass


def build(folder: str, clang: str) -> tuple[str | None, str]:
    """Build and check the native client into `folder` with `clang`: (its path, "") or (None, why not)."""
    import subprocess
    import tempfile

    from optserve.clients import resident_wire

    os.makedirs(folder, exist_ok=True)
    current = stamp()
    client, lock = f"{folder}/{NAME}", f"{folder}/{NAME}.lock"
    if not _take(lock):
        return None, f"another build holds {lock}"
    try:
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            built = os.path.join(scratch, NAME)
            failures = []
            for compiler in dict.fromkeys([clang, "clang-19", "cc"]):  # plain C: any C compiler will do
                try:
                    done = subprocess.run(
                        compile_command(compiler, SOURCE, built),
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=120,
                    )
                except (OSError, subprocess.TimeoutExpired) as err:
                    failures.append(f"{compiler}: {err}")
                    continue
                if done.returncode == 0 and os.path.exists(built):
                    break
                failures.append(f"{compiler}: {done.stderr.decode(errors='replace')[-300:]}")
            else:
                return _unavailable(folder, current, "no compiler could build it: " + "; ".join(failures))
            checked = subprocess.run([built, "--key"], capture_output=True, timeout=30)
            expected = f"{resident_wire.MAGIC.decode()} {resident_wire.install_key()}"
            if checked.stdout.decode(errors="replace").strip() != expected:
                seen = checked.stdout.decode(errors="replace").strip()
                return _unavailable(folder, current, f"it computes {seen!r}, Python {expected!r}")
            os.replace(built, client)
        with open(f"{client}.stamp.tmp", "w") as note:
            note.write(current + "\n")
        os.replace(f"{client}.stamp.tmp", f"{client}.stamp")
        return client, ""
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)


def compile_command(clang: str, source: str, output: str) -> list[str]:
    """`clang` building the native client from `source` into `output` for this install: its version,
    interpreter and clients/ folder compiled in."""
    from optserve import __version__

    facts = {"OPTCC_VERSION": __version__, "OPTCC_PYTHON": sys.executable}
    facts["OPTCC_CLIENTS"] = os.path.dirname(SOURCE)
    defines = [f"-D{name}={_c_string(value)}" for name, value in facts.items()]
    return [clang, "-O2", "-std=gnu11", "-w", *defines, source, "-o", output]


def _c_string(text: str) -> str:
    """`text` as a C string literal (a -D value: an argument, no shell)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _unavailable(folder: str, current: str, why: str) -> tuple[None, str]:
    try:
        with open(f"{folder}/{NAME}.{current}.unavailable", "w") as marker:
            marker.write(why + "\n")
    except OSError:
        pass
    return None, why


def _take(lock: str) -> bool:
    """Create `lock` (ours); a stale one (a dead build's) is removed first."""
    if os.path.exists(lock) and not _locked(lock):
        with contextlib.suppress(OSError):
            os.unlink(lock)
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        return False


def _locked(lock: str) -> bool:
    import time

    try:
        return time.time() - os.stat(lock).st_mtime < LOCK_STALE_S
    except OSError:
        return False


def _compiler(env) -> str:
    return env.get("OPTCC_CLANG") or "clang-19"


def _start_build(folder: str, clang: str) -> None:
    """`python -m optserve.clients.native_client` detached in a session of its own, its output to
    `<folder>/build.log`, holding none of the descriptors the build handed the command beyond 0-2 (a pipe
    someone reads to its end, a jobserver's)."""
    os.makedirs(folder, exist_ok=True)
    log = os.open(f"{folder}/build.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        # -P: the build's folder (this command's working folder) is not on its import path
        command = [sys.executable, "-P", "-m", "optserve.clients.native_client", folder, clang]
        spawn.detached(command, log, setsid=True)
    finally:
        os.close(log)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m optserve.clients.native_client FOLDER CLANG", file=sys.stderr)
        return 2
    client, why = build(argv[0], argv[1])
    if client is None:
        print(f"optcc: no native client in {argv[0]}: {why}", file=sys.stderr)
        return 1
    print(client)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
