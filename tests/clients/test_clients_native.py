"""optcc's native thin client (clients/thin_client.c, built by clients/native_client.py) behind the installed
sh script (clients/sh-scripts/optcc): a unit it sends to the resident server gives what the Python client
gives (object, output, diagnostics, exit status) without a Python process; a command that compiles
nothing is clang's; anything it does not do (resident off, no server, a server of another protocol) runs
through the Python client exactly as before, and the script runs the Python client while no native client
is built. Real clang-19 and real resident servers, each in a folder of its test.

Each test has a bin folder of its own holding the installed scripts and, as `optcc-py`, a stand-in that
notes each run in `python.log` before it execs this venv's Python client: so a test sees whether Python ran.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from optserve.clients import native_client
from optserve.clients import resident_wire as wire
from tests.clients.test_clients_resident import (
    DOWN,
    UNIT_COMMAND,
    _servers_of,
    _started,
    private_folder,
    running_sleepy,
    with_units,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "clients" / "sh-scripts"
VENV_BIN = Path(sys.executable).parent


def _bin(where: Path) -> Path:
    """A bin folder as an install has it: the sh scripts, and Python clients that note each run."""
    where.mkdir()
    for name in ("optcc", "optcc++"):
        shutil.copy2(SCRIPTS / name, where / name)
        stand_in = where / f"{name}-py"
        stand_in.write_text(f'#!/bin/sh\necho "$*" >> {where}/python.log\nexec {VENV_BIN}/{name}-py "$@"\n')
        stand_in.chmod(0o755)
    return where


@pytest.fixture
def bin_folder(tmp_path) -> Path:
    """This test's bin folder, its native client built (into the session's OPTCC_TAP_DIR)."""
    where = _bin(tmp_path / "bin")
    built, why = native_client.build(native_client.native_folder(os.environ, str(where)), "clang-19")
    assert built, why
    return where


@pytest.fixture
def folder():
    yield from private_folder("optcc-rn-", VENV_BIN / "optcc-py", _env)


@pytest.fixture
def work(tmp_path) -> Path:
    return with_units(tmp_path)


def _env(folder: Path, resident: bool = True, **extra: str) -> dict[str, str]:
    """An optcc command's environment: its own resident folder, the service unreachable."""
    settings = {"OPTCC_RESIDENT": "1" if resident else "0", "OPTCC_RESIDENT_DIR": str(folder)}
    return os.environ | settings | {"OPTCC_SERVER": DOWN} | extra


def run(program: Path, work: Path, folder: Path, *args: str, resident=True, stdin=None, **extra):
    """One command in `work` with a TMPDIR of its own (its own build: notices shown once per build show)."""
    tmp = Path(tempfile.mkdtemp(dir=work))
    return subprocess.run(
        [str(program), *args],
        cwd=work,
        env=_env(folder, resident, TMPDIR=str(tmp), **extra),
        input=stdin,
        capture_output=True,
        timeout=300,
    )


def _python_runs(bin_folder: Path) -> int:
    log = bin_folder / "python.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _start_server(folder: Path) -> None:
    started = subprocess.run(
        [VENV_BIN / "optcc-py", "--start-server"], env=_env(folder), capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr


def test_the_native_client_speaks_the_wire_protocol_and_computes_pythons_install_key(bin_folder):
    """Its copy of the protocol's MAGIC is resident_wire's, and the key it computes (version, interpreter,
    clients/ sources) is the Python client's: both use one server."""
    source = (REPO_ROOT / "clients" / "thin_client.c").read_text()
    assert re.search(r'#define MAGIC "([^"]+)"', source)[1] == wire.MAGIC.decode()
    client = native_client.native_folder(os.environ, str(bin_folder)) + "/optcc-client"
    printed = subprocess.run([client, "--key"], capture_output=True, text=True, check=True).stdout
    assert printed.split() == [wire.MAGIC.decode(), wire.install_key()]


def test_a_unit_served_through_the_native_client_is_the_python_clients(bin_folder, work, folder):
    """Same object, stdout, stderr (clang's notice that the service is down) and status, and no Python
    process on the native client's side."""
    _start_server(folder)
    native = run(bin_folder / "optcc", work, folder, *UNIT_COMMAND[:-1], "native.o")
    python = run(VENV_BIN / "optcc-py", work, folder, *UNIT_COMMAND[:-1], "python.o")
    assert native.returncode == python.returncode == 0, native.stderr
    assert (native.stdout, native.stderr) == (python.stdout, python.stderr)
    assert (work / "native.o").read_bytes() == (work / "python.o").read_bytes()
    assert _python_runs(bin_folder) == 0
    assert len(_servers_of(folder)) == 1


def test_a_failing_compile_gives_its_status_and_diagnostics(bin_folder, work, folder):
    _start_server(folder)
    command = ("-Oz", "-c", "broken.c", "-o", "broken.o")
    native = run(bin_folder / "optcc", work, folder, *command)
    python = run(VENV_BIN / "optcc-py", work, folder, *command)
    assert native.returncode == python.returncode == 1
    assert b"undefined_thing" in native.stderr and native.stderr == python.stderr
    assert _python_runs(bin_folder) == 0


def test_stdin_stdout_and_stderr_reach_the_served_command(bin_folder, work, folder):
    """A unit read from stdin, its object written to stdout, a warning on stderr: through the server's
    child, as clang gives them."""
    _start_server(folder)
    source = "int unused_here(void) { int never; return 1; }\n"
    command = ("-Oz", "-Wall", "-x", "c", "-c", "-", "-o", "-")
    native = run(bin_folder / "optcc", work, folder, *command, stdin=source.encode())
    clang = subprocess.run(["clang-19", *command], cwd=work, input=source.encode(), capture_output=True)
    assert native.returncode == clang.returncode == 0, native.stderr
    assert native.stdout[:4] == b"\x7fELF" and native.stdout == clang.stdout
    assert b"unused variable 'never'" in native.stderr
    assert _python_runs(bin_folder) == 0


def test_optcc_plus_plus_serves_a_cxx_unit(bin_folder, work, folder):
    _start_server(folder)
    (work / "unit.cpp").write_text(
        "template <class T> T twice(T x) { return x + x; }\nint f(int x) { return twice(x); }\n"
    )
    command = ("-Oz", "-c", "unit.cpp", "-o", "unit.o")
    native = run(bin_folder / "optcc++", work, folder, *command)
    assert native.returncode == 0, native.stderr
    clang = subprocess.run(["clang++-19", *command[:-1], "clang.o"], cwd=work, capture_output=True)
    assert clang.returncode == 0 and (work / "unit.o").read_bytes() == (work / "clang.o").read_bytes()
    assert _python_runs(bin_folder) == 0


def test_a_command_that_compiles_nothing_is_clangs_without_python(bin_folder, work, folder):
    native = run(bin_folder / "optcc", work, folder, "-E", "unit.c")
    clang = subprocess.run(["clang-19", "-E", "unit.c"], cwd=work, capture_output=True)
    assert (native.returncode, native.stdout, native.stderr) == (clang.returncode, clang.stdout, clang.stderr)
    assert _python_runs(bin_folder) == 0 and not _servers_of(folder)


def test_a_missing_compiler_is_reported_by_the_python_client(bin_folder, work, folder):
    """OPTCC_CLANG names nothing runnable: the Python client says so, with its status, as before."""
    native = run(bin_folder / "optcc", work, folder, "-E", "unit.c", OPTCC_CLANG=str(work / "no-such-clang"))
    python = run(VENV_BIN / "optcc-py", work, folder, "-E", "unit.c", OPTCC_CLANG=str(work / "no-such-clang"))
    assert native.returncode == python.returncode == 127
    assert native.stderr == python.stderr and b"cannot run" in native.stderr
    assert _python_runs(bin_folder) == 1


@pytest.mark.parametrize("command", [("--help",), ("--version",), ("--stats",)])
def test_optccs_own_commands_and_compiler_identification_go_to_python(bin_folder, work, folder, command):
    native = run(bin_folder / "optcc", work, folder, *command)
    python = run(VENV_BIN / "optcc-py", work, folder, *command)
    assert native.returncode == python.returncode == 0
    assert native.stdout == python.stdout
    assert _python_runs(bin_folder) == 1


def test_without_a_server_the_python_client_starts_one_and_the_next_unit_is_native(bin_folder, work, folder):
    first = run(bin_folder / "optcc", work, folder, *UNIT_COMMAND)
    assert first.returncode == 0, first.stderr
    assert _python_runs(bin_folder) == 1 and len(_servers_of(folder)) == 1
    second = run(bin_folder / "optcc", work, folder, *UNIT_COMMAND)
    assert second.returncode == 0 and second.stderr == first.stderr
    assert _python_runs(bin_folder) == 1


def test_resident_off_runs_the_python_client_in_process(bin_folder, work, folder):
    done = run(bin_folder / "optcc", work, folder, *UNIT_COMMAND, resident=False)
    assert done.returncode == 0 and (work / "unit.o").exists(), done.stderr
    assert _python_runs(bin_folder) == 1 and not _servers_of(folder)


def test_a_server_of_another_protocol_leaves_the_command_to_python(bin_folder, work, folder, tmp_path):
    """A native client built from older code (its MAGIC another version) meets a server: the server answers
    "run it yourself", and the unit runs through the Python client, with its object."""
    _start_server(folder)
    stale_source = tmp_path / "stale_client.c"
    source = (REPO_ROOT / "clients" / "thin_client.c").read_text()
    stale_source.write_text(source.replace(wire.MAGIC.decode(), "optcc-resident-0"))
    client = native_client.native_folder(os.environ, str(bin_folder)) + "/optcc-client"
    built = subprocess.run(
        native_client.compile_command("clang-19", str(stale_source), client), capture_output=True
    )
    assert built.returncode == 0, built.stderr
    done = run(bin_folder / "optcc", work, folder, *UNIT_COMMAND)
    assert done.returncode == 0 and (work / "unit.o").exists(), done.stderr
    assert _python_runs(bin_folder) == 1
    logged = "".join(log.read_text() for log in folder.glob("*.log"))
    assert "a request of protocol optcc-resident-0" in logged


def test_a_child_that_dies_before_its_status_leaves_the_unit_to_python(bin_folder, work, folder):
    """The server's child is killed while clang runs: the unit runs again through the Python client (its
    outputs are written atomically) and builds."""
    _start_server(folder)
    clang = work / "clang-killing-its-parent"
    marker = work / "killed-once"
    clang.write_text(
        f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; kill -KILL $PPID; sleep 1; exit 3; fi\n"
        'exec clang-19 "$@"\n'
    )
    clang.chmod(0o755)
    done = run(bin_folder / "optcc", work, folder, *UNIT_COMMAND, OPTCC_CLANG=str(clang))
    assert done.returncode == 0 and marker.exists() and (work / "unit.o").exists(), done.stderr
    assert _python_runs(bin_folder) == 1


def test_ctrl_c_reaches_the_served_command_and_ends_the_native_client_by_it(bin_folder, work, folder):
    _start_server(folder)
    command = running_sleepy(bin_folder / "optcc", work, lambda clang: _env(folder, OPTCC_CLANG=clang))
    command.send_signal(signal.SIGINT)
    assert command.wait(timeout=10) == -signal.SIGINT
    assert _python_runs(bin_folder) == 0


def test_the_script_runs_the_python_client_while_no_native_client_is_built(work, folder, tmp_path):
    """No native client for this bin folder: the script execs `optcc-py` (the unit builds, as before), and
    that Python client starts the native client's build in the background for the next units."""
    where = _bin(tmp_path / "fresh-bin")
    noting = where / "optcc-py.noting"
    (where / "optcc-py").rename(noting)
    (where / "optcc-py").symlink_to(VENV_BIN / "optcc-py")  # the Python client as installed beside it
    native = Path(native_client.native_folder(os.environ, str(where)))
    done = run(where / "optcc", work, folder, *UNIT_COMMAND)
    assert done.returncode == 0 and (work / "unit.o").exists(), done.stderr
    assert not native.joinpath("optcc-client").exists() or _python_runs(where) == 0
    ends = time.monotonic() + 60
    while not (native / "optcc-client.stamp").exists() and time.monotonic() < ends:
        time.sleep(0.1)
    assert (native / "optcc-client").exists(), (native / "build.log").read_text()
    noting.replace(where / "optcc-py")
    again = run(where / "optcc", work, folder, *UNIT_COMMAND)
    assert again.returncode == 0 and _python_runs(where) == 0  # served by the native client
    assert len(_started(folder)) == 1


def test_a_wrapped_compiler_that_cannot_build_it_leaves_the_build_to_clang(tmp_path):
    """OPTCC_CLANG names a compiler that cannot build C (a wrapper of the build's): clang-19 builds the
    native client instead, and no marker says it is unavailable."""
    not_a_compiler = tmp_path / "not-a-compiler"
    not_a_compiler.write_text("#!/bin/sh\nexit 1\n")
    not_a_compiler.chmod(0o755)
    folder = native_client.native_folder(os.environ, str(_bin(tmp_path / "bin")))
    built, why = native_client.build(folder, str(not_a_compiler))
    assert built and not why and not list(Path(folder).glob("*.unavailable"))


def test_the_installed_scripts_are_posix_sh_that_start_no_process():
    for name in ("optcc", "optcc++"):
        script = SCRIPTS / name
        assert os.access(script, os.X_OK)
        text = script.read_text()
        code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert text.startswith("#!/bin/sh\n") and not any("$(" in line or "`" in line for line in code)
        assert subprocess.run(["dash", "-n", str(script)]).returncode == 0
