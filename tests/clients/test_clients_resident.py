"""optcc's resident server (clients/resident_server.py) behind the installed optcc (resident_client.py): a
command it serves gives what the same command gives in-process (output, diagnostics, exit status, objects),
one server starts for a burst of commands, a socket that is not this install's live server is never used,
and a server that fails (or is not wanted) leaves the command to optcc in-process. Real clang-19, the real
service where a unit is answered; every server runs in a folder of its test and is stopped at its end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from optserve.clients import resident_wire as wire
from tests.clients.clients_helpers import PROGRAM

BIN = Path(sys.executable).parent
OPTCC = BIN / "optcc"  # the installed sh script (clients/sh-scripts/optcc)
OPTCC_PY = BIN / "optcc-py"  # the Python client it execs when no native client is built
UNIT_COMMAND = ("-Oz", "-c", "unit.c", "-o", "unit.o")  # a unit taken over: the server's work
UNIT = "int scaled(int x) { for (int k = 0; k < 9; k++) x = x * 3 + k; return x; }\n"
BROKEN = "int main(void) { return undefined_thing; }\n"
# Modules a served unit's client must not load: the in-process optcc's imports, which the server holds.
HEAVY = (
    "grpc",
    "google",
    "pydantic",
    "elftools",
    "optserve.clients.takeover",
    "optserve.clients.object_cache",
)


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


DOWN = f"127.0.0.1:{_unused_port()}"  # no service there


def _servers_of(folder: Path) -> list[int]:
    """Pids of the resident servers whose socket is in `folder` (their command line names it), not counting
    their forked children (same command line) that serve a command."""
    parents = _processes_of(folder)
    return [pid for pid, parent in parents.items() if parent not in parents]


def _processes_of(folder: Path) -> dict[int, int]:
    """{pid: parent pid} of the resident servers of `folder` and their forked children."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if b"optserve.clients.resident_server" in command and any(
                part.startswith(os.fsencode(folder) + b"/") for part in command
            ):
                parents[int(entry)] = parent
    return parents


def private_folder(prefix: str, stop: Path, env=lambda path: os.environ | {"OPTCC_RESIDENT_DIR": str(path)}):
    """A private resident folder of a test (short: a socket's path has 107 bytes at most), yielded; its
    servers are stopped at the end (`stop --stop-server` in `env(folder)`), killed if they do not stop."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    yield path
    subprocess.run([stop, "--stop-server"], env=env(path), capture_output=True)
    ends = time.monotonic() + 5
    while _servers_of(path) and time.monotonic() < ends:
        time.sleep(0.05)
    for pid in _servers_of(path):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def folder():
    yield from private_folder("optcc-rs-", OPTCC)


def with_units(folder: Path) -> Path:
    """`folder` with a unit that compiles (unit.c) and one that does not (broken.c)."""
    (folder / "unit.c").write_text(UNIT)
    (folder / "broken.c").write_text(BROKEN)
    return folder


@pytest.fixture
def work(tmp_path) -> Path:
    return with_units(tmp_path)


def _env(folder: Path, resident: bool, **extra: str) -> dict[str, str]:
    """The environment of an optcc command: the service unreachable unless `extra` names one."""
    settings = {"OPTCC_RESIDENT": "1" if resident else "0", "OPTCC_RESIDENT_DIR": str(folder)}
    return os.environ | settings | {"OPTCC_SERVER": DOWN} | extra


def optcc(work: Path, folder: Path, resident: bool, *args: str, stdin: str | None = None, **extra: str):
    """One optcc command in `work`, with a TMPDIR of its own (its own build: a fallback notice shows). With
    `resident`, the client runs under `python -X importtime`: its `served` is whether it left the command to
    the server (it loaded the link to it, and never optcc's compile path); those lines are taken out of its
    stderr."""
    tmp = Path(tempfile.mkdtemp(dir=work))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", OPTCC_PY, *args] if resident else [OPTCC, *args],
        cwd=work,
        env=_env(folder, resident, TMPDIR=str(tmp), **extra),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    imported = [line for line in done.stderr.splitlines(keepends=True) if line.startswith("import time:")]
    done.stderr = "".join(line for line in done.stderr.splitlines(keepends=True) if line not in imported)
    names = {line.split("|")[-1].strip() for line in imported}
    done.served = "optserve.clients.resident_link" in names and "optserve.clients.takeover" not in names
    return done


def both(work: Path, folder: Path, *args: str, output: str | None = None, **extra: str):
    """The command in-process, then through the server: (in-process result, served result, outputs)."""
    results, outputs = [], []
    for resident in (False, True):
        results.append(optcc(work, folder, resident, *args, **extra))
        if output:
            outputs.append((work / output).read_bytes() if (work / output).exists() else None)
            (work / output).unlink(missing_ok=True)
    return results[0], results[1], outputs


def _same(local: subprocess.CompletedProcess, served: subprocess.CompletedProcess, by_server=True) -> None:
    assert (served.returncode, served.stdout, served.stderr) == (local.returncode, local.stdout, local.stderr)
    assert served.served == by_server


def _started(folder: Path) -> list[str]:
    """The start lines of every server that logged in `folder`."""
    return [
        line
        for log in folder.glob("*.log")
        for line in log.read_text().splitlines()
        if line.startswith("optcc server") and " at " in line
    ]


def test_a_unit_the_service_answers_is_the_same_served_and_the_client_loads_no_grpc(
    work, folder, optserve_target
):
    """A unit taken over and answered by the real service: same object, output and log outcome both ways;
    the served command's client process imports neither gRPC nor pydantic nor optcc's rules and compile
    path."""
    records = []
    for resident in (False, True):
        log = work / f"optcc-{resident}.jsonl"
        command = [OPTCC_PY if resident else OPTCC, "-Oz", "-c", "unit.c", "-o", f"unit-{resident}.o"]
        if resident:  # the client as Python runs it, with its import times on stderr
            command = [sys.executable, "-X", "importtime", *command]
        done = subprocess.run(
            command,
            cwd=work,
            env=_env(
                folder,
                resident,
                OPTCC_SERVER=optserve_target,
                OPTCC_LOG=str(log),
                TMPDIR=str(work),
                OPTCC_CACHE="0",
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        records.append(json.loads(log.read_text()))
    assert (work / "unit-False.o").read_bytes() == (work / "unit-True.o").read_bytes()
    assert records[0]["outcome"] == records[1]["outcome"] == "service"
    assert records[0]["winner"] == records[1]["winner"]
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "import time:" in line}
    assert "optserve.clients.resident_client" in imported
    # a compile goes to the server, whose child decides: the client imports none of optcc's rules
    assert "optserve.clients.resident_link" in imported and "optserve.clients.optcc" not in imported
    assert not {name for name in imported if name.split(".")[0] in HEAVY or name in HEAVY}
    assert len(_started(folder)) == 1


def test_a_compile_error_reaches_stderr_with_clangs_status(work, folder):
    port = _unused_port()
    local, served, outputs = both(
        work, folder, "-Oz", "-c", "broken.c", "-o", "broken.o", output="broken.o",
        OPTCC_SERVER=f"127.0.0.1:{port}",
    )  # fmt: skip
    assert local.returncode != 0 and "undefined_thing" in local.stderr
    _same(local, served)
    assert outputs == [None, None]
    assert _started(folder)


def test_a_unit_with_the_service_down_gets_clangs_object_and_the_same_notice(work, folder):
    port = _unused_port()
    local, served, outputs = both(
        work, folder, "-Oz", "-c", "unit.c", "-o", "unit.o", output="unit.o", OPTCC_SERVER=f"127.0.0.1:{port}"
    )
    assert local.returncode == 0 and "using clang-19 -Oz instead" in local.stderr
    _same(local, served)
    assert outputs[0] == outputs[1] and outputs[0][:4] == b"\x7fELF"


def test_commands_that_compile_nothing_run_in_the_client_and_start_no_server(work, folder):
    """configure's kind of commands that compile nothing (a preprocessor run on a file and on stdin, a probe
    compile and link): exec'd in the client on clang as given, before any of optcc is imported, which no
    server makes quicker."""
    _same(*both(work, folder, "-E", "-dM", "unit.c")[:2], by_server=False)
    piped = "#define TWICE(x) ((x)*2)\nint v = TWICE(3);\n"
    _same(*both(work, folder, "-E", "-x", "c", "-", stdin=piped)[:2], by_server=False)
    (work / "conftest.c").write_text("int main(void) { return 0; }\n")
    local, served, outputs = both(work, folder, "conftest.c", "-o", "conftest", output="conftest")
    _same(local, served, by_server=False)
    assert local.returncode == 0 and outputs[0] is not None and outputs[1] is not None
    _same(*both(work, folder, "--stats")[:2], by_server=False)
    assert not _started(folder) and not list(folder.glob("*.sock"))


def test_compiles_optcc_does_not_take_over_are_clangs_from_the_servers_child(work, folder):
    """A `-c` optcc hands to clang unchanged (a missing file, another -O level, configure's probe): the
    server's child decides by the same rules and runs clang, with clang's own output and status."""
    (work / "conftest.c").write_text("int main(void) { return 0; }\n")
    for args, output in (
        (["-c", "missing.c"], None),
        (["-O2", "-c", "unit.c", "-o", "unit.o"], "unit.o"),
        (["-Oz", "-c", "conftest.c", "-o", "conftest.o"], "conftest.o"),
    ):
        local, served, outputs = both(work, folder, *args, output=output)
        _same(local, served, by_server=True)
        assert not output or outputs[0] == outputs[1] is not None
    assert len(_started(folder)) == 1


def test_a_compiler_identification_starts_the_server_ahead_for_the_build_that_follows(work, folder):
    """configure's `$CC --version` is exec'd in the client as before (clang's own output) and starts the
    server in the background, without waiting for it: the build's first unit finds it listening, and no
    second server starts."""

    def version_query() -> None:  # clang's answer either way (the client loads the link to start a server)
        local, served, _ = both(work, folder, "--version")
        assert (served.returncode, served.stdout, served.stderr) == (local.returncode, local.stdout, "")
        assert "clang version 19" in served.stdout

    version_query()
    ends = time.monotonic() + 60
    while not (list(folder.glob("*.sock")) and _started(folder)) and time.monotonic() < ends:
        time.sleep(0.05)
    assert len(_started(folder)) == 1 and list(folder.glob("*.starting"))
    version_query()  # one listens: nothing more is started
    unit = optcc(work, folder, True, "-Oz", "-c", "unit.c", "-o", "unit.o")
    assert unit.returncode == 0 and unit.served, unit.stderr
    assert len(_started(folder)) == 1 and len(_servers_of(folder)) == 1


def _noted_model(cache: Path) -> str | None:
    """The service's model as optcc's object cache noted it (object_cache.known_model), if it did."""
    notes = list((cache / "models").glob("*.json"))
    return json.loads(notes[0].read_text())["model"] if notes else None


def test_a_compiler_identification_notes_the_services_model_for_the_build_that_follows(
    work, folder, optserve_target
):
    """configure's `$CC --version` has the server note the service's model in optcc's object cache (in a
    child, the command does not wait for it): by a server it starts ahead, and by one already listening, so
    that the build's first units do not each ask the service for it before their clang starts."""
    cache = work / "cache"
    env = _env(folder, True, OPTCC_SERVER=optserve_target, OPTCC_CACHE_DIR=str(cache))

    def noted_within(seconds: float) -> str | None:
        ends = time.monotonic() + seconds
        while _noted_model(cache) is None and time.monotonic() < ends:
            time.sleep(0.05)
        return _noted_model(cache)

    for started_ahead in (True, False):  # then one listens
        shutil.rmtree(cache, ignore_errors=True)
        done = subprocess.run([OPTCC, "--version"], cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0 and "clang version 19" in done.stdout, done.stderr
        assert "@" in (noted_within(60) or ""), f"started ahead: {started_ahead}"
    assert len(_started(folder)) == 1


def test_bad_settings_fall_back_to_clang_the_same_through_the_server(work, folder):
    """A unit taken over whose settings optcc cannot use goes to clang unchanged, from the server's child
    (run and waited for there, not exec'd)."""
    _same(*both(work, folder, "-Oz", "-c", "unit.c", "-o", "unit.o", OPTCC_OBJECTIVE="speed")[:2])


def test_a_burst_of_commands_starts_one_server(work, folder):
    """Six units at once, as `make -j` starts them with no server running: one client starts it (the lock),
    all are served by it and all succeed."""
    results = [None] * 6

    down = f"127.0.0.1:{_unused_port()}"

    def run(index: int) -> None:
        results[index] = optcc(
            work, folder, True, "-Oz", "-c", "unit.c", "-o", f"unit{index}.o", OPTCC_SERVER=down
        )

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(results))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.returncode == 0 and r.served for r in results), [r.stderr for r in results]
    assert len({(work / f"unit{i}.o").read_bytes() for i in range(len(results))}) == 1
    assert len(_started(folder)) == 1
    assert len(_servers_of(folder)) == 1


def test_make_builds_the_program_through_the_server(folder, tmp_path):
    program = Path(shutil.copytree(PROGRAM, tmp_path / "wordstat"))
    env = _env(folder, True, OPTCC_SERVER=f"127.0.0.1:{_unused_port()}", TMPDIR=str(tmp_path))
    make = ["make", "-s", "-j2", f"CC={OPTCC}", "CFLAGS=-Oz"]
    built = subprocess.run(make, cwd=program, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert (program / "wordstat").exists() and len(_started(folder)) == 1


def _spawn_server(socket_path: str, key: str) -> subprocess.Popen:
    command = [sys.executable, "-P", "-m", "optserve.clients.resident_server"]
    server = subprocess.Popen(
        [*command, "--socket", socket_path, "--key", key, "--idle", "60"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout.readline().startswith("optcc server")  # listening
    return server


def test_a_server_of_other_code_is_never_used(work, folder):
    """A server with another install's key, even at this install's socket, answers `fall back`: the command
    runs in-process; one at its own name is left alone while this install starts its own."""
    wire.private_folder(str(folder))
    ours = wire.Paths(str(folder), wire.install_key())
    impostor = _spawn_server(ours.socket, "0.0.0-00000000")
    other = _spawn_server(str(folder / "optcc-0.0.0-11111111.sock"), "0.0.0-11111111")
    try:
        local, served, _ = both(work, folder, *UNIT_COMMAND)
        _same(local, served, by_server=False)
        assert impostor.poll() is None  # asked, it declined; the command ran in-process
        assert not _started(folder)  # no server of this install was started: the socket is taken
        impostor.terminate()
        impostor.wait(10)
        _same(local, optcc(work, folder, True, *UNIT_COMMAND))
        assert len(_started(folder)) == 1 and other.poll() is None
    finally:
        for server in (impostor, other):
            server.kill()
            server.wait()


@pytest.mark.parametrize("leftover", ["file", "dead socket"])
def test_a_leftover_at_the_socket_path_is_replaced(work, folder, leftover):
    wire.private_folder(str(folder))
    path = wire.Paths(str(folder), wire.install_key()).socket
    if leftover == "file":
        Path(path).write_text("not a socket")
    else:  # a server that died without removing its socket
        with socket.socket(socket.AF_UNIX) as dead:
            dead.bind(path)
    local, served, _ = both(work, folder, *UNIT_COMMAND)
    _same(local, served)
    assert len(_started(folder)) == 1 and Path(path).is_socket()


def test_a_folder_others_may_write_is_not_used(work, folder):
    folder.chmod(0o755)
    local, served, _ = both(work, folder, *UNIT_COMMAND)
    _same(local, served, by_server=False)
    assert not list(folder.iterdir())


def test_resident_off_never_starts_a_server(work, folder):
    target = folder / "off"
    env = {"OPTCC_SERVER": f"127.0.0.1:{_unused_port()}"}
    for args in (["-E", "unit.c"], ["-Oz", "-c", "unit.c", "-o", "unit.o"], ["--version"]):
        assert optcc(work, target, False, *args, **env).returncode == 0
    assert not target.exists() and not _servers_of(target)


def _killing_clang(work: Path) -> Path:
    """A clang that, the first time, kills the process that runs it (the server's child for this command)
    and then fails; afterwards it is clang-19."""
    script = work / "clang-killing-its-parent"
    marker = work / "killed-once"
    script.write_text(
        f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; kill -KILL $PPID; sleep 1; exit 3; fi\n"
        f'exec clang-19 "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_a_child_killed_mid_command_leaves_it_to_optcc_in_process(work, folder):
    """The served child dies before it sends a status (killed while clang runs): the client runs the command
    in-process and the unit still builds, with clang's own object."""
    clang = _killing_clang(work)
    port = _unused_port()
    served = optcc(
        work, folder, True, "-Oz", "-c", "unit.c", "-o", "unit.o", OPTCC_CLANG=str(clang),
        OPTCC_SERVER=f"127.0.0.1:{port}",
    )  # fmt: skip
    assert served.returncode == 0 and not served.served, served.stderr  # it fell back
    assert (work / "killed-once").exists()
    reference = optcc(
        work, folder, False, "-Oz", "-c", "unit.c", "-o", "reference.o", OPTCC_SERVER=f"127.0.0.1:{port}"
    )
    assert reference.returncode == 0
    assert (work / "unit.o").read_bytes() == (work / "reference.o").read_bytes()
    assert len(_servers_of(folder)) == 1  # the server itself lives on


def test_a_command_survives_its_server_being_killed(work, folder):
    """The server process itself dies while its child compiles a unit: the child finishes and reports; the
    next unit starts a new server."""
    slow = work / "slow-clang"
    slow.write_text('#!/bin/sh\nsleep 1\nexec clang-19 "$@"\n')
    slow.chmod(0o755)
    env = _env(folder, True)
    started = subprocess.run([OPTCC, "--start-server"], env=env, capture_output=True, text=True)
    [server] = _servers_of(folder)
    command = subprocess.Popen(
        [OPTCC, *UNIT_COMMAND], cwd=work, env=_env(folder, True, OPTCC_CLANG=str(slow)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(0.5)
    os.kill(server, signal.SIGKILL)
    _, err = command.communicate(timeout=60)
    assert command.returncode == 0 and (work / "unit.o").exists(), (started.stdout, err)
    assert optcc(work, folder, True, *UNIT_COMMAND).served
    assert len(_started(folder)) == 2


def test_ctrl_c_reaches_the_command_and_ends_the_client_by_it(work, folder):
    """SIGINT to the client (make's Ctrl-C) reaches the served unit's clang, and the client dies of it."""
    command = running_sleepy(OPTCC, work, lambda clang: _env(folder, True, OPTCC_CLANG=clang))
    command.send_signal(signal.SIGINT)
    assert command.wait(timeout=10) == -signal.SIGINT
    time.sleep(0.2)
    assert not _descendants_sleeping(work)


def running_sleepy(program: Path, work: Path, env_of) -> subprocess.Popen:
    """`program` compiling the unit in `work` with a clang that sleeps (OPTCC_CLANG, in `env_of(clang)`),
    returned once that clang runs."""
    sleepy, running = work / "sleepy-clang", work / "clang-running"
    sleepy.write_text(f"#!/bin/sh\ntouch {running}\nexec sleep 30\n")
    sleepy.chmod(0o755)
    command = subprocess.Popen(
        [program, *UNIT_COMMAND], cwd=work, env=env_of(str(sleepy)), stderr=subprocess.PIPE
    )
    ends = time.monotonic() + 30
    while not running.exists() and time.monotonic() < ends:
        time.sleep(0.02)
    assert running.exists()
    return command


def _descendants_sleeping(work: Path) -> list[int]:
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and _cmdline(entry) == [b"sleep", b"30"] and _cwd(entry) == work
    ]


def _cmdline(pid: str) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        return []


def _cwd(pid: str) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def test_a_clang_killed_by_a_signal_gives_the_same_status(work, folder):
    crashing = work / "crashing-clang"
    crashing.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crashing.chmod(0o755)
    local, served, _ = both(work, folder, *UNIT_COMMAND, OPTCC_CLANG=str(crashing))
    assert local.returncode == served.returncode != 0 and served.served


def test_a_clang_handed_the_command_and_killed_by_a_signal_exits_128_plus_the_signal(work, folder):
    """The one difference: in-process optcc becomes clang (exec) and dies of its signal; the server's child
    runs it and reports the status as a shell would."""
    crashing = work / "crashing-clang"
    crashing.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crashing.chmod(0o755)
    env = {"OPTCC_CLANG": str(crashing), "OPTCC_OBJECTIVE": "speed"}  # a bad setting: handed to clang
    local, served, _ = both(work, folder, *UNIT_COMMAND, **env)
    assert local.returncode == -signal.SIGSEGV
    assert served.returncode == 128 + signal.SIGSEGV and served.served


def test_the_server_exits_when_idle_and_removes_its_socket(work, folder):
    assert optcc(work, folder, True, *UNIT_COMMAND, OPTCC_RESIDENT_IDLE="1").served
    [server] = _servers_of(folder)
    ends = time.monotonic() + 30
    while _servers_of(folder) and time.monotonic() < ends:
        time.sleep(0.1)
    assert not _servers_of(folder)
    assert not list(folder.glob("*.sock"))
    assert "exits (idle for" in "".join(log.read_text() for log in folder.glob("*.log"))


def test_a_unit_is_served_by_a_child_forked_ahead_which_ends_with_the_server(work, folder):
    """While no request is open the server forks the child that serves the next unit (a unit does not wait
    for a fork); that child serves it, another is forked for the next; killed, the server leaves none."""

    def spares(server: int) -> list[int]:
        ends = time.monotonic() + 10
        while time.monotonic() < ends:
            children = [pid for pid, parent in _processes_of(folder).items() if parent == server]
            if len(children) == 1:
                return children
            time.sleep(0.05)
        return children

    assert optcc(work, folder, True, *UNIT_COMMAND).served
    [server] = _servers_of(folder)
    [spare] = spares(server)
    assert optcc(work, folder, True, *UNIT_COMMAND).served
    [next_spare] = spares(server)
    assert next_spare != spare and spare not in _processes_of(folder)
    os.kill(server, signal.SIGKILL)
    ends = time.monotonic() + 10
    while _processes_of(folder) and time.monotonic() < ends:
        time.sleep(0.05)
    assert not _processes_of(folder)


def test_stop_and_start_server(folder):
    env = _env(folder, True)
    started = subprocess.run([OPTCC, "--start-server"], env=env, capture_output=True, text=True)
    assert started.returncode == 0 and "resident server (pid" in started.stdout
    assert len(_servers_of(folder)) == 1
    stopped = subprocess.run([OPTCC, "--stop-server"], env=env, capture_output=True, text=True)
    assert "stopped the resident server" in stopped.stdout
    ends = time.monotonic() + 10
    while _servers_of(folder) and time.monotonic() < ends:
        time.sleep(0.05)
    assert not _servers_of(folder) and not list(folder.glob("*.sock"))
    again = subprocess.run([OPTCC, "--stop-server"], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "no resident server" in again.stdout


def test_a_server_that_cannot_start_is_not_tried_by_every_unit(work, folder):
    """A server that exits before it listens (here: a folder in the way of its socket) leaves its unit to
    optcc in-process, and the units after it do not start another for a while (RETRY_START_S)."""
    wire.private_folder(str(folder))
    blocker = Path(wire.Paths(str(folder), wire.install_key()).socket)
    blocker.mkdir()
    (blocker / "keep").write_text("")
    local, first, outputs = both(work, folder, *UNIT_COMMAND, output="unit.o")
    _same(local, first, by_server=False)
    assert outputs[0] == outputs[1]
    second = optcc(work, folder, True, *UNIT_COMMAND)
    assert second.returncode == 0 and not second.served
    log = "".join(path.read_text() for path in folder.glob("*.log"))
    assert log.count("exits (an error)") == 1 and not _servers_of(folder)
