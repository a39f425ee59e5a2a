"""The package as a build machine installs it: a wheel built from the tree, installed into a fresh venv with
only the client's dependencies, on each Python the client supports (3.11, 3.12, 3.13), whose optcc and
optcc++ build and run a C program and a C++ file against a running service."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from optserve import __version__
from tests.clients.clients_helpers import PROGRAM

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVICE_STACK = ("torch", "vllm", "ray", "transformers", "fastapi", "llvmlite", "numpy", "yaml")
STUBS = ("optserve/v1/optserve_pb2.py", "optserve/v1/optserve_pb2_grpc.py", "optserve/v1/optserve_pb2.pyi")
TAP_SOURCE = "optserve/clients/bitcode_tap.cpp"  # optcc builds its bitcode tap from it
NATIVE_SOURCE = "optserve/clients/thin_client.c"  # and its native thin client from this
SCRIPTS = tuple(f"optserve-{__version__}.data/scripts/{name}" for name in ("optcc", "optcc++"))  # sh scripts


def _run(*command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel --no-deps .` of the working tree (build isolation: only the declared build requirements)."""
    out = tmp_path_factory.mktemp("wheel")
    result = _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO_ROOT), "-w", str(out))
    assert result.returncode == 0, result.stderr
    return next(out.glob("optserve-*.whl"))


# The Pythons of `requires-python`; the service and training extras need 3.11 (pyproject.toml says why).
CLIENT_PYTHONS = ("3.11", "3.12", "3.13")


def _interpreter(version: str) -> str:
    """A working python`version`: this test's own, else one on PATH, else pyenv's (whose shims on PATH
    answer only for the versions pyenv has selected)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(str(p) for p in pyenv_root.glob(f"versions/{version}.*/bin/python{version}"))
    for candidate in filter(None, candidates):
        if _run(candidate, "-c", "import sys").returncode == 0:
            return candidate
    pytest.fail(f"no python{version} here (the client is checked on each of {CLIENT_PYTHONS}): pyenv install")


@pytest.fixture(scope="module", params=CLIENT_PYTHONS, ids=lambda version: f"py{version}")
def client_venv(request, wheel, tmp_path_factory) -> Path:
    """A fresh venv of each client Python holding `optserve[client]` from the wheel; its bin/ folder.
    Made without pip of its own and filled by this Python's pip (`--python`), which saves ensurepip's
    ~15 s per venv; pip's indexes are those it is configured with, as a user's would be."""
    venv = tmp_path_factory.mktemp(f"client-venv-{request.param}")
    made = _run(_interpreter(request.param), "-m", "venv", "--clear", "--without-pip", str(venv))
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    result = _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "-q",
        "--no-compile",
        f"{wheel}[client]",
    )
    assert result.returncode == 0, result.stderr
    version = _run(str(python), "-c", "import sys; print(*sys.version_info[:2], sep='.')").stdout.strip()
    assert version == request.param
    return venv / "bin"


def _clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without anything pointing at this tree's venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OPTSERVE_CONFIG")}
    return env | extra


@pytest.mark.slow
def test_the_wheel_holds_the_grpc_stubs_and_the_bundled_models(wheel):
    tracked = _run("git", "ls-files", "models", cwd=REPO_ROOT).stdout.split()
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(STUBS) <= names and {TAP_SOURCE, NATIVE_SOURCE, *SCRIPTS} <= names
    assert tracked and {f"optserve/{path}" for path in tracked} <= names


@pytest.mark.slow
def test_the_client_install_has_no_service_stack_and_finds_the_bundled_models(client_venv):
    probe = (
        "import importlib.util, json, sys\n"
        "from optserve.config import Settings\n"
        "settings = Settings()\n"
        "print(json.dumps({'missing': [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None],\n"
        "    'model_dir': str(settings.engine.model_dir), 'policy': str(settings.looptune.policy_path)}))\n"
    )
    result = _run(str(client_venv / "python"), "-c", probe, *SERVICE_STACK, env=_clean_env(), cwd="/")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["missing"] == list(SERVICE_STACK)
    venv_root = client_venv.parent.resolve()
    for path in (Path(found["model_dir"]) / "model.safetensors", Path(found["policy"])):
        assert path.is_file() and venv_root in path.resolve().parents


@pytest.mark.slow
def test_optcc_help_and_the_python_client_work_from_the_client_install(client_venv):
    """Without a service: optcc prints its promise before clang's help; the Python client imports and
    makes its request messages."""
    for script in ("optcc", "optcc++"):  # the sh scripts, executable, each beside its Python client
        assert (client_venv / script).read_text().startswith("#!/bin/sh\n")
        assert os.access(client_venv / script, os.X_OK) and os.access(client_venv / f"{script}-py", os.X_OK)
    helped = _run(str(client_venv / "optcc"), "--help", env=_clean_env())
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("optcc and optcc++")
    probe = (
        "from optserve.clients.python.client import OptserveClient\n"
        "from optserve.v1 import optserve_pb2 as pb\n"
        "print(pb.OptimizeRequest(ir_text='x').ir_text, OptserveClient.__name__)\n"
    )
    imported = _run(str(client_venv / "python"), "-c", probe, env=_clean_env(), cwd="/")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == ["x", "OptserveClient"]


def _outcomes(log: Path) -> set[str]:
    return {json.loads(line)["outcome"] for line in log.read_text().splitlines()}


@pytest.mark.slow
def test_optcc_from_the_client_install_builds_a_program_with_the_service(
    client_venv, optserve_target, tmp_path
):
    program = Path(shutil.copytree(PROGRAM, tmp_path / "wordstat"))
    log = program / "optcc.jsonl"
    env = _clean_env(OPTCC_SERVER=optserve_target, OPTCC_LOG=str(log), TMPDIR=str(tmp_path))
    result = _run("make", "-s", f"CC={client_venv / 'optcc'}", "CFLAGS=-Oz", cwd=program, env=env)
    assert result.returncode == 0, result.stderr
    assert _outcomes(log) == {"service"}
    ran = _run(str(program / "wordstat"), input=(program / "input.txt").read_text(), cwd=program)
    assert ran.returncode == 0 and ran.stdout, ran.stderr


CXX_SOURCE = """\
#include <cstdio>
#include <map>
#include <string>

template <typename Key> std::map<Key, int> histogram(const Key *keys, int n) {
    std::map<Key, int> counts;
    for (int i = 0; i < n; ++i) ++counts[keys[i]];
    return counts;
}

int main() {
    const std::string words[] = {"pass", "list", "pass", "order", "pass"};
    for (const auto &[word, count] : histogram(words, 5)) std::printf("%s %d\\n", word.c_str(), count);
}
"""


@pytest.mark.slow
def test_optcc_plus_plus_from_the_client_install_builds_a_cxx_file_with_the_service(
    client_venv, optserve_target, tmp_path
):
    (tmp_path / "histogram.cpp").write_text(CXX_SOURCE)
    log = tmp_path / "optcc.jsonl"
    env = _clean_env(OPTCC_SERVER=optserve_target, OPTCC_LOG=str(log), TMPDIR=str(tmp_path))
    cxx = str(client_venv / "optcc++")
    for command in (
        [cxx, "-std=c++17", "-Oz", "-c", "histogram.cpp"],
        [cxx, "histogram.o", "-o", "histogram"],
    ):
        result = _run(*command, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
    assert _outcomes(log) == {"service"}
    ran = _run(str(tmp_path / "histogram"), cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, "list 1\norder 1\npass 3\n")


@pytest.mark.slow
def test_the_cli_remote_commands_run_from_the_client_install(client_venv, optserve_target):
    result = _run(
        str(client_venv / "optserve"), "health", "--target", optserve_target, "--json", env=_clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["server"] == "SERVING"
