"""The tuning store (tuning/) is runtime code: importing the training wing from it breaks the contract."""

from __future__ import annotations

from tests.contracts.lint_imports import lint_staged, stage_package


def test_a_tuning_module_importing_training_code_breaks_the_contract(tmp_path):
    staged = stage_package(tmp_path)
    (staged / "optserve" / "tuning" / "contract_probe.py").write_text(
        "from optserve.corpus import functions\n"
    )
    result = lint_staged(staged)
    assert result.returncode != 0
    assert "optserve.tuning is not allowed to import optserve.corpus" in result.stdout
