"""The store's keys: the toolchain of this install, the IR hash, the pass vocabulary's version."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import llvmlite.binding

from optserve.compiler.cache import ir_digest
from optserve.tuning import keys
from optserve.tuning.keys import current_toolchain, ir_hash, vocabulary_version


def test_the_toolchain_names_the_objective_target_llvm_and_vocabulary_of_this_install():
    toolchain = current_toolchain("text_size", "x86_64-unknown-linux-gnu")
    assert (toolchain.objective, toolchain.target) == ("text_size", "x86_64-unknown-linux-gnu")
    assert toolchain.llvm_version == ".".join(map(str, llvmlite.binding.llvm_version_info))
    assert toolchain.vocabulary == vocabulary_version()


def test_the_ir_hash_is_the_sha256_the_service_keys_ir_by():
    text = "define void @f() {\n  ret void\n}\n"
    assert ir_hash(text) == hashlib.sha256(text.encode()).hexdigest() == ir_digest(text)


def test_the_vocabulary_version_changes_when_the_served_passes_change(monkeypatch):
    before = vocabulary_version()
    keys.vocabulary_version.cache_clear()
    monkeypatch.setattr(keys, "PASS_NAMES", (*keys.PASS_NAMES, "newgvn"))
    try:
        assert vocabulary_version() != before
    finally:
        keys.vocabulary_version.cache_clear()


def test_opening_and_reading_a_store_loads_no_llvm(tmp_path):
    code = (
        "import sys\n"
        "from optserve.tuning import open_store\n"
        f"with open_store({str(tmp_path / 't.sqlite3')!r}) as store:\n"
        "    store.stats()\n"
        "assert 'llvmlite' not in sys.modules, 'the store imported llvmlite'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
