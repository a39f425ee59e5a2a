"""optcc's bitcode tap (bitcode_tap.cpp), built once per compiler: the LLVM pass plugin that lets clang's
one-step compile also hand optcc the unit's unoptimized bitcode, so that a unit takes one clang process
instead of two (the IR step, then clang's back end on its bitcode: compile_modes.py).

The plugin must be built against the LLVM of the very clang that loads it, so it is built by that clang,
with the LLVM headers of its install (`<prefix>/include/llvm`, Debian's llvm-19-dev), into
`<OPTCC_CACHE_DIR>/tap/<key>.so`, the key naming the compiler (resolved path, size, mtime) and the tap's
source. `ready` never waits for a build: without a built tap it starts one in the background (a lock makes
a `make -j` start one) and the unit goes the two-process way. A build checks its tap before it is used: on a
small unit, clang's object with the tap must be byte for byte clang's object without it, and the bitcode the
tap wrote byte for byte what the IR step writes. A compiler without the headers, or whose tap fails that
check, gets a marker (`<key>.unavailable`, with why) and no further tries; OPTCC_TAP=0 turns the tap off.

The gate (`run_tapped(..., gated=True)`, then `open_gate`): clang waits, its bitcode written, until optcc
says whether its own -Oz pipeline and code generator are to run: a unit with a record of clang's object
(baseline_memo.py) is compared there, and one whose service object wins skips clang's back end in the same
process (the module emptied; clang still writes its dependency file, and sends its exit status on its way
out: `stopped_status`), where without the gate it would take two (the IR step, then the back end). The
build's check covers the gate too.

`python -m optserve.clients.bitcode_tap CLANG FOLDER` builds it in the foreground and says where it is (or
why not); `make` does this for clang-19.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("bitcode_tap.cpp")
FD_VARIABLE = "OPTCC_BITCODE_FD"  # the descriptor the tap writes the bitcode to (bitcode_tap.cpp reads it)
GATE_VARIABLE = "OPTCC_GATE_FD"  # the descriptor clang reads optcc's word from at the gate
GO_ON, STOP = b"c", b"s"  # the words: clang's own object; none (the module emptied)
LOCK_STALE_S = 120.0  # a build lock older than this is taken to be a dead build's
_CHECK_UNIT = b"int optcc_tap_check(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * n; return s; }\n"


def ready(folder: str | None, clang: str) -> str | None:
    """The path of the tap built for `clang` in `folder`, or None: no folder (OPTCC_TAP=0, no cache
    folder), a compiler the tap cannot be built for, or a tap not built yet (then a build is started in the
    background, unless one runs)."""
    if folder is None:
        return None
    key = _key(clang)
    if key is None:
        return None
    if os.path.exists(os.path.join(folder, f"{key}.unavailable")):
        return None
    plugin = os.path.join(folder, f"{key}.so")
    if os.path.exists(plugin):
        return plugin
    _start_build(folder, clang)
    return None


def broken(folder: str, clang: str, why: str) -> None:
    """Mark the tap of `clang` unusable (clang could not load it): units go the two-process way from now."""
    key = _key(clang)
    if key is not None:
        _mark_unavailable(Path(folder), key, why)


def build(folder: str, clang: str) -> tuple[str | None, str]:
    """Build and check the tap for `clang` in `folder`: (its path, "") or (None, why not). Waits for another
    process's build of the same tap rather than building it twice."""
    import subprocess
    import tempfile
    import time

    key = _key(clang)
    if key is None:
        return None, f"{clang} was not found"
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    plugin = out / f"{key}.so"
    lock = out / f"{key}.lock"
    deadline = time.monotonic() + LOCK_STALE_S
    while not _take(lock):
        if plugin.exists():
            return str(plugin), ""
        if time.monotonic() > deadline:
            return None, f"another build of the tap holds {lock}"
        time.sleep(0.2)
    try:
        if plugin.exists():
            return str(plugin), ""
        compiler = os.path.realpath(_which(clang) or clang)
        headers = Path(compiler).parent.parent / "include"
        if not (headers / "llvm" / "Passes" / "PassPlugin.h").exists():
            why = f"no LLVM headers at {headers} for {compiler} (Debian: apt-get install llvm-19-dev)"
            _mark_unavailable(out, key, why)
            return None, why
        with tempfile.TemporaryDirectory(dir=out) as scratch:
            built = Path(scratch) / "tap.so"
            command = [compiler, "--driver-mode=g++", "-shared", "-fPIC", "-O2", "-std=c++17", "-fno-rtti"]
            done = subprocess.run(
                [*command, "-I", str(headers), str(SOURCE), "-o", str(built)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
            if done.returncode != 0:
                why = f"building the tap failed: {done.stderr.decode(errors='replace')[-400:]}"
                _mark_unavailable(out, key, why)
                return None, why
            why = _check(compiler, str(built), Path(scratch))
            if why:
                _mark_unavailable(out, key, why)
                return None, why
            os.replace(built, plugin)
        return str(plugin), ""
    finally:
        lock.unlink(missing_ok=True)


def run_tapped(
    command: list[str], plugin: str, stderr, gated: bool = False
) -> tuple[object, int, int | None]:
    """Start clang's `command` with the tap loaded and its bitcode descriptor open: (the process, the read
    end of the descriptor, the gate's write end or None). The bitcode arrives on the read end and ends when
    the tap closes it, before clang's optimization pipeline runs, or when clang exits. `gated`: clang then
    waits at the gate until `open_gate` (or the gate's end, if optcc closes it or exits: clang goes on)."""
    import subprocess

    read_end, write_end = os.pipe()
    gate_read, gate = _socket_pair() if gated else (None, None)
    passed = (write_end,) if gate is None else (write_end, gate_read)
    environment = {**os.environ, FD_VARIABLE: str(write_end)}
    if gate is not None:
        environment[GATE_VARIABLE] = str(gate_read)
    try:
        process = subprocess.Popen(
            [command[0], f"-fpass-plugin={plugin}", *command[1:]],
            stdin=subprocess.DEVNULL,
            stderr=stderr,
            pass_fds=passed,
            env=environment,
        )
    except BaseException:
        os.close(read_end)
        if gate is not None:
            os.close(gate)
        raise
    finally:
        for fd in passed:
            os.close(fd)
    return process, read_end, gate


def open_gate(gate: int, stop: bool) -> bool:
    """Give clang, waiting at the gate, its word: `stop` (the service's object is the unit's: clang's back end
    runs on an emptied module) or go on to its own object. False when clang had gone (it died at the gate):
    it got no word. The gate is closed, unless clang was told to stop: then `stopped_status` reads it."""
    try:
        told = os.write(gate, STOP if stop else GO_ON) == 1
    except OSError:  # EPIPE: no reader left (Python ignores SIGPIPE)
        told = False
    if not (told and stop):
        os.close(gate)
    return told


def stopped_status(gate: int) -> int | None:
    """The exit status clang, told to stop, sends on its way out (its dependency file written and closed),
    before the process is torn down, which optcc need not wait for; None when it sent none (killed: wait for
    the process). Closes the gate."""
    try:
        while True:
            try:
                status = os.read(gate, 1)
                break
            except InterruptedError:
                continue
    except OSError:
        status = b""
    finally:
        os.close(gate)
    return status[0] if status else None


def _socket_pair() -> tuple[int, int]:
    """The gate: a socket pair (clang's end, optcc's end), both ways: optcc's word, then clang's status."""
    import socket

    ours, theirs = socket.socketpair()
    return theirs.detach(), ours.detach()


def read_bitcode(read_end: int) -> bytes:
    """Everything the tap writes to `read_end` (empty when it wrote nothing: clang stopped before its
    pipeline), then closes it."""
    chunks = []
    try:
        while chunk := os.read(read_end, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(read_end)
    return b"".join(chunks)


def load_failure(stderr: bytes, plugin: str) -> bool:
    """Whether clang's diagnostics say it could not load the tap (not an error in the unit)."""
    return f"unable to load plugin '{plugin}'".encode() in stderr


def _check(compiler: str, plugin: str, scratch: Path) -> str:
    """Why the freshly built tap must not be used, or "": clang's object with it must equal clang's object
    without it, and its bitcode the IR step's, without the gate and through it with the word to go on; told
    to stop, clang must still write its dependency file, report its status 0 and exit 0."""
    import subprocess

    unit = scratch / "check.c"
    unit.write_bytes(_CHECK_UNIT)
    plain = subprocess.run(
        [compiler, "-Oz", "-c", str(unit), "-o", str(scratch / "plain.o")], capture_output=True
    )
    ir_step = [compiler, "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c", str(unit)]
    ir = subprocess.run([*ir_step, "-o", str(scratch / "check.bc")], capture_output=True)
    if plain.returncode or ir.returncode:
        diagnostics = (plain.stderr + ir.stderr).decode(errors="replace")
        return f"{compiler} cannot compile a check unit: {diagnostics[-400:]}"
    tapped, dependencies = scratch / "tapped.o", scratch / "check.d"
    for gate in (None, GO_ON, STOP):
        tapped.unlink(missing_ok=True)
        command = [compiler, "-Oz", "-c", str(unit), "-o", str(tapped), "-MD", "-MF", str(dependencies)]
        with open(scratch / "tapped.stderr", "w+b") as errors:
            process, read_end, gate_end = run_tapped(command, plugin, errors, gated=gate is not None)
            bitcode = read_bitcode(read_end)
            told = gate_end is None or open_gate(gate_end, stop=gate == STOP)
            reported = stopped_status(gate_end) if gate == STOP and told else 0
            process.wait()
            errors.seek(0)
            diagnostics = errors.read().decode(errors="replace")
        how = "" if gate is None else f" (at the gate told {gate.decode()})"
        if process.returncode != 0 or not told or reported != 0:
            return f"clang could not run with the tap{how}: {diagnostics[-400:]}"
        if bitcode != (scratch / "check.bc").read_bytes():
            return f"the tap's bitcode differs from the IR step's{how}"
        if gate == STOP:
            if not dependencies.exists():
                return f"clang wrote no dependency file{how}"
        elif tapped.read_bytes() != (scratch / "plain.o").read_bytes():
            return f"clang's object with the tap differs from its object without it{how}"
        dependencies.unlink(missing_ok=True)
    return ""


def _key(clang: str) -> str | None:
    """The tap's file name for `clang`: its identity (object_cache.compiler_identity) and the tap's source."""
    from optserve.clients.object_cache import compiler_identity

    compiler = compiler_identity(clang)
    try:
        source = SOURCE.read_bytes()
    except OSError:  # an install without the tap's source: units take the two-process way
        return None
    if compiler is None:
        return None
    inputs = [compiler, hashlib.sha256(source).hexdigest()]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:24]


def _which(clang: str) -> str | None:
    import shutil

    return clang if os.sep in clang else shutil.which(clang)


def _take(lock: Path) -> bool:
    """Create `lock` (ours), or clear it if stale and say no (the caller tries again)."""
    import time

    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        try:
            if time.time() - lock.stat().st_mtime > LOCK_STALE_S:
                lock.unlink(missing_ok=True)
        except OSError:
            pass
        return False


def _mark_unavailable(folder: Path, key: str, why: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}.unavailable").write_text(why + "\n")
    except OSError:
        pass  # no marker: the next unit tries again, which costs a background build, never the unit


def _start_build(folder: str, clang: str) -> None:
    """Build the tap in a detached process (its output to `<folder>/build.log`), unless a build holds the
    lock; the unit does not wait for it."""
    import subprocess

    key = _key(clang)
    if key is None or os.path.exists(os.path.join(folder, f"{key}.lock")):
        return
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "build.log"), "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "optserve.clients.bitcode_tap", clang, folder],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError:
        pass  # the unit goes the two-process way; the next one tries again


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m optserve.clients.bitcode_tap CLANG FOLDER", file=sys.stderr)
        return 2
    plugin, why = build(argv[1], argv[0])
    if plugin is None:
        print(f"optcc: no bitcode tap for {argv[0]}: {why}", file=sys.stderr)
        return 1
    print(plugin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
