"""Shared fixtures: a tiny random model directory (built once per session), engines on it, tokenizers, IR."""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from optserve.passlm.tiny_model import build_tiny_model, synthetic_corpus, synthetic_function
from optserve.passlm.tokenizer import train_tokenizer

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=2)


@pytest.fixture(scope="session")
def torch_engine(tiny_model_dir):
    from optserve.engine.engine import ModelEngine

    engine = ModelEngine.load(tiny_model_dir, backend="torch")
    yield engine
    asyncio.run(engine.close())


@pytest.fixture(scope="session")
def pass_token_tokenizer(tiny_model_dir):
    """The bundled format's tokenizer: every pass name and meta flag is one added token."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def split_pass_tokenizer(tmp_path_factory):
    """Byte-level BPE with a small vocabulary and no pass tokens: pass names span several tokens."""
    from transformers import AutoTokenizer

    directory = tmp_path_factory.mktemp("split-tokenizer")
    train_tokenizer(synthetic_corpus(200, seed=1), vocab_size=300, pass_tokens=False).save_pretrained(
        directory
    )
    return AutoTokenizer.from_pretrained(directory)  # reloaded as any HF tokenizer would be


@pytest.fixture(scope="session")
def sample_ir() -> str:
    return synthetic_function(random.Random(5), "sample")


@pytest.fixture(scope="session")
def loop_function_ir() -> str:
    """Real clang-19 -O0 IR: the module of one function (`find_first`) of tests/data/c/loops.c."""
    from optserve.compiler.ir import split_functions

    if shutil.which("clang-19") is None:
        pytest.fail("clang-19 is not installed; `make test` installs it (apt-get install clang-19)")
    command = ["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-w", "-S"]
    source = str(DATA / "c" / "loops.c")
    module = subprocess.run([*command, source, "-o", "-"], check=True, capture_output=True, text=True).stdout
    return dict(split_functions(module))["find_first"]
