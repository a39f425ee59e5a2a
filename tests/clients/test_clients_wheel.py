"""The package as a build machine installs it: a wheel built from the tree, installed into a fresh venv with
only the client's dependencies, whose optcc builds a C program against a running service."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.clients.clients_helpers import PROGRAM

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVICE_STACK = ("torch", "vllm", "ray", "transformers", "fastapi", "llvmlite", "numpy", "yaml")
STUBS = ("optserve/v1/optserve_pb2.py", "optserve/v1/optserve_pb2_grpc.py", "optserve/v1/optserve_pb2.pyi")


def _run(*command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel --no-deps .` of the working tree (build isolation: only the declared build requirements)."""
    out = tmp_path_factory.mktemp("wheel")
    result = _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO_ROOT), "-w", str(out))
    assert result.returncode == 0, result.stderr
    return next(out.glob("optserve-*.whl"))


@pytest.fixture(scope="module")
def client_venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding `optserve[client]` from the wheel; its bin/ folder."""
    venv = tmp_path_factory.mktemp("client-venv")
    assert _run(sys.executable, "-m", "venv", "--clear", str(venv)).returncode == 0
    result = _run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[client]")
    assert result.returncode == 0, result.stderr
    return venv / "bin"


def _clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without anything pointing at this tree's venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OPTSERVE_CONFIG")}
    return env | extra


@pytest.mark.slow
def test_the_wheel_holds_the_grpc_stubs_and_the_bundled_models(wheel):
    tracked = _run("git", "ls-files", "models", cwd=REPO_ROOT).stdout.split()
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(STUBS) <= names
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
def test_optcc_from_the_client_install_builds_a_program_with_the_service(
    client_venv, optserve_target, tmp_path
):
    program = Path(shutil.copytree(PROGRAM, tmp_path / "wordstat"))
    log = program / "optcc.jsonl"
    env = _clean_env(OPTCC_SERVER=optserve_target, OPTCC_LOG=str(log), TMPDIR=str(tmp_path))
    result = _run("make", "-s", f"CC={client_venv / 'optcc'}", "CFLAGS=-Oz", cwd=program, env=env)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and {r["outcome"] for r in records} == {"service"}


@pytest.mark.slow
def test_the_cli_remote_commands_run_from_the_client_install(client_venv, optserve_target):
    result = _run(
        str(client_venv / "optserve"), "health", "--target", optserve_target, "--json", env=_clean_env()
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["server"] == "SERVING"
