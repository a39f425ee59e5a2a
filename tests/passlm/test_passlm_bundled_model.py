"""The bundled pass-ordering model (models/passformer): loads in transformers and in vLLM (CPU build), writes
valid pass lists for real IR, and both backends agree on its candidates."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from optserve.compiler.passes import validate_pass_list
from optserve.engine.interface import SamplingOptions, Strategy
from optserve.engine.profile import ModelProfile

MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "passformer"
C_SOURCES = Path(__file__).resolve().parents[1] / "data" / "c"
MAX_BUNDLE_BYTES = 20_000_000

pytestmark = pytest.mark.skipif(not MODEL_DIR.is_dir(), reason="no bundled model")


@pytest.fixture(scope="module")
def prompts_ir() -> list[str]:
    """Real clang-19 -O0 functions (one module per function) from the test C sources."""
    from optserve.compiler.ir import split_functions

    command = ["clang-19", "-O0", "-Xclang", "-disable-O0-optnone", "-emit-llvm", "-w", "-S", "-o", "-"]
    functions = []
    for source in ("loops.c", "structs.c"):
        module = subprocess.run(
            [*command, str(C_SOURCES / source)], check=True, capture_output=True, text=True
        )
        functions += [ir for _, ir in split_functions(module.stdout)[:2]]
    assert len(functions) == 4
    return functions


def test_bundle_is_small_and_complete():
    names = {p.name for p in MODEL_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "profile.json"} <= names
    assert sum(p.stat().st_size for p in MODEL_DIR.iterdir()) < MAX_BUNDLE_BYTES
    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    ModelProfile.load(MODEL_DIR)


def test_transformers_loads_it_and_greedy_answers_follow_the_profile(prompts_ir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from optserve.compiler.ir import normalize_ir

    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    profile = ModelProfile.load(MODEL_DIR)
    for ir in prompts_ir:
        ids = [
            tokenizer.bos_token_id,
            *tokenizer.encode(profile.prompt(normalize_ir(ir)), add_special_tokens=False),
        ]
        out = model.generate(torch.tensor([ids]), max_new_tokens=profile.max_new_tokens, do_sample=False)
        answer = tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True)
        # unconstrained decoding: the trained model writes the format by itself, with the passes it was
        # trained on: the vocabulary and newgvn, which the served grammar does not offer (passes.py)
        first, _, rest = answer.partition("\n")
        trained_on = " ".join(p for p in first.split() if p != "newgvn") or "-O0"
        parsed = profile.answer_format().parse(f"{trained_on}\n{rest}")
        validate_pass_list(list(parsed.pass_list))
        assert parsed.cost_before is not None and parsed.cost_after is not None


@pytest.fixture(scope="module")
def event_loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.mark.slow
def test_vllm_and_torch_backends_return_the_same_candidates(prompts_ir, event_loop):
    from optserve.engine.engine import ModelEngine

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    torch_engine = ModelEngine.load(MODEL_DIR, backend="torch")
    vllm_engine = event_loop.run_until_complete(_load(MODEL_DIR, "vllm"))
    try:
        for options in (SamplingOptions(), SamplingOptions(strategy=Strategy.PRIORITY, samples=5)):
            for ir in prompts_ir:
                from_torch = asyncio.run(torch_engine.generate(ir, options))
                from_vllm = event_loop.run_until_complete(vllm_engine.generate(ir, options))
                lists = [c.pass_list for c in from_torch.candidates]
                assert lists == [c.pass_list for c in from_vllm.candidates]
                assert len(lists) == len(set(lists)) == options.samples
                for pass_list in lists:
                    validate_pass_list(list(pass_list))
    finally:
        event_loop.run_until_complete(vllm_engine.close())
        asyncio.run(torch_engine.close())


async def _load(model_dir: Path, backend: str):
    from optserve.engine.engine import ModelEngine

    return ModelEngine.load(model_dir, backend=backend)
