"""The import contracts of pyproject.toml hold for the tree, and a forbidden import breaks them."""

from __future__ import annotations

import pytest

from tests.contracts.lint_imports import lint_staged, stage_package


@pytest.fixture
def staged(tmp_path):
    return stage_package(tmp_path)


def _add_module(staged, folder: str, source: str) -> None:
    (staged / "optserve" / folder / "contract_probe.py").write_text(source)


def test_the_tree_keeps_every_import_contract(staged):
    result = lint_staged(staged)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_runtime_module_importing_training_code_breaks_the_contract(staged):
    _add_module(staged, "engine", "def f():\n    from optserve.passlm import examples\n")
    result = lint_staged(staged)
    assert result.returncode != 0
    assert "optserve.engine is not allowed to import optserve.passlm" in result.stdout


def test_a_looptune_runtime_module_importing_its_training_wing_breaks_the_contract(staged):
    # every module of policies/ is runtime (the served tile cover included), not only those named in a list
    _add_module(staged, "policies", "from optserve.looptune_training.suites import HELD_OUT\n")
    result = lint_staged(staged)
    assert result.returncode != 0
    assert "optserve.policies is not allowed to import optserve.looptune_training" in result.stdout


def test_the_compile_path_importing_the_service_stack_breaks_the_contract(staged):
    _add_module(staged, "clients", "from optserve.serve.replicas import deployments\n")
    result = lint_staged(staged)
    assert result.returncode != 0
    assert "optserve.clients is not allowed to import ray" in result.stdout


def test_a_runtime_module_importing_the_test_helpers_breaks_the_contract(staged):
    _add_module(staged, "compiler", "from optserve.testing.polling import poll\n")
    result = lint_staged(staged)
    assert result.returncode != 0
    assert "optserve.compiler is not allowed to import optserve.testing" in result.stdout
