"""A real optserve for optcc's tests: Ray Serve, the tiny stand-in model (torch backend), real compiler
workers, gRPC and HTTP on ports of their own (28100/29100), so they never meet the serve tests' service.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from optserve.config import Settings
from tests.clients.clients_helpers import GRPC_PORT, HTTP_PORT, PROGRAM

BIN = os.path.dirname(sys.executable)  # this venv's optcc, optcc-py


# Package scope: one pytest process may run several service folders; each folder's service stops (and Ray
# with it) before the next folder's starts with its own settings (docs/structure_audit.md).
@pytest.fixture(scope="package")
def optserve_target(tmp_path_factory) -> str:
    """host:port of a running service's gRPC API."""
    from optserve.serve import server

    model_dir = tmp_path_factory.mktemp("tiny-model")
    subprocess.run(
        [sys.executable, "-m", "optserve.passlm.tiny_model", str(model_dir)], check=True, capture_output=True
    )
    settings = Settings.model_validate(
        {
            "compiler": {"workers": 2},
            # No coreset lists, no lists per function (for inputs longer than the stand-in model's context,
            # nor per function of a unit): the never-larger tests need units where the service answers -Oz
            # (LLVM 20), which clang-19 beats.
            "engine": {
                "model_dir": str(model_dir),
                "backend": "torch",
                "max_samples": 20,
                "coreset_fallback_lists": 0,
                "unit_function_prompts": 0,
                "coreset_lists_with_model": 0,
                "unit_function_lists": 0,
            },  # fmt: skip
            "serve": {"http_port": HTTP_PORT, "grpc_port": GRPC_PORT, "ray_num_cpus": 4},
        }
    )
    endpoints = server.start(settings)
    yield endpoints.grpc_target
    server.stop()


@pytest.fixture(scope="session")
def resident_folder():
    """With OPTCC_TEST_RESIDENT=1 every test's optcc commands go through a resident server in a folder of
    this session (the served path run by the whole suite), stopped at the end; else None (in-process, as
    under pytest by default: clients/settings.py's ResidentSettings)."""
    if os.environ.get("OPTCC_TEST_RESIDENT") != "1":
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="optcc-rs-", dir="/tmp"))
    yield folder
    optcc = Path(sys.executable).with_name("optcc")
    subprocess.run(
        [optcc, "--stop-server"], env=os.environ | {"OPTCC_RESIDENT_DIR": str(folder)}, check=False
    )
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def tap_folder(tmp_path_factory) -> Path:
    """The bitcode tap for clang-19, built once for the session (clients/bitcode_tap.py): optcc's units take
    the one-process way in every test, as after a user's first build; without LLVM's headers the folder
    holds the marker that says why, and units take the two-process way. With it, the native client."""
    from optserve.clients import bitcode_tap, native_client

    folder = tmp_path_factory.mktemp("optcc-tap")
    bitcode_tap.build(str(folder), "clang-19")
    # and the native thin client of this venv's optcc (clients/native_client.py), as `optcc --build-tap`
    # builds it: the tests' optcc commands take the installed way, sh script, native client, Python client
    native_client.build(native_client.native_folder({"OPTCC_TAP_DIR": str(folder)}, BIN), "clang-19")
    return folder


@pytest.fixture(autouse=True)
def empty_object_cache(tmp_path, monkeypatch, resident_folder, tap_folder) -> Path:
    """Every test starts with an empty optcc object cache of its own (never the user's ~/.cache/optcc)."""
    cache = tmp_path / "optcc-cache"
    monkeypatch.setenv("OPTCC_CACHE_DIR", str(cache))
    monkeypatch.setenv("OPTCC_TAP_DIR", str(tap_folder))
    # Tests that expect the service's answer must not hang on how loaded this machine is: no per-unit budget
    # (the fixed OPTCC_DEADLINE) unless a test sets one.
    monkeypatch.setenv("OPTCC_BUDGET", "0")
    # The model's strategies and their time budget are what these tests check; the default strategy
    # (`stored`, the tuning store's fast path) has its own tests (test_clients_stored.py).
    monkeypatch.setenv("OPTCC_STRATEGY", "greedy")
    if resident_folder is not None:
        monkeypatch.setenv("OPTCC_RESIDENT", "1")
        monkeypatch.setenv("OPTCC_RESIDENT_DIR", str(resident_folder))
    return cache


@pytest.fixture
def program(tmp_path) -> Path:
    """A fresh copy of the multi-file C program (its own Makefile, sources and input)."""
    return Path(shutil.copytree(PROGRAM, tmp_path / "wordstat"))
