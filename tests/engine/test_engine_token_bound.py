"""The token-count bound (engine/engine.py `TokenBound`) and what the engine does with it: a module far
longer than the context is refused without being tokenized, and prompts are prepared off the event loop."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from optserve.engine.engine import TokenBound
from optserve.engine.interface import PromptTooLongError, SamplingOptions
from optserve.passlm.tiny_model import synthetic_function

BUNDLED_MODEL = Path(__file__).resolve().parents[2] / "models" / "passformer"


def _long_module(functions: int) -> str:
    rng = random.Random(0)
    return "\n".join(synthetic_function(rng, f"f{i}") for i in range(functions))


def _texts(loop_function_ir: str) -> list[str]:
    """IR of both kinds, and text made to defeat the bound: long digit runs (the bundled vocabulary has a
    1280-byte token of digits), multi-byte characters, pass names (added tokens), random printable text."""
    rng = random.Random(3)
    return [
        loop_function_ir,
        _long_module(20),
        "1234567890" * 500,
        "0" * 3000 + " " * 700 + "\n" * 300,
        "é∑漢字🙂 " * 200,
        " ".join(["instcombine", "strip-dead-debug-info", "-Oz", "loop-unroll-and-jam"] * 100),
        "".join(rng.choice("0123456789 %@=,.:;abcXYZ\n\t") for _ in range(20000)),
        "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(5000)),
    ]


@pytest.fixture(scope="module")
def tokenizers(tiny_model_dir):
    from transformers import AutoTokenizer

    return {
        "tiny": AutoTokenizer.from_pretrained(tiny_model_dir),
        "bundled": AutoTokenizer.from_pretrained(BUNDLED_MODEL),
    }


@pytest.mark.parametrize("which", ["tiny", "bundled"])
def test_the_bound_never_exceeds_the_token_count(tokenizers, loop_function_ir, which):
    tokenizer = tokenizers[which]
    bound = TokenBound.of(tokenizer)
    assert bound is not None
    for text in _texts(loop_function_ir):
        count = len(tokenizer.encode(text, add_special_tokens=False))
        assert bound.least_tokens(text) <= count, text[:80]


def test_the_bundled_tokenizer_s_longest_token_is_read_from_its_vocabulary(tokenizers):
    """1280 bytes (a run of digits): a bound of "bytes / longest token" alone would refuse nothing; the bound
    per byte value is what makes it useful."""
    assert TokenBound.of(tokenizers["bundled"]).longest_token_bytes == 1280


def test_a_module_far_over_the_context_is_bounded_well_over_it(tokenizers):
    from optserve.compiler.ir import normalize_ir

    module = normalize_ir(_long_module(1200))  # ~1.2 MB, ~550k tokens with the bundled tokenizer
    least = TokenBound.of(tokenizers["bundled"]).least_tokens(module)
    assert least > 20 * 4096


def test_a_tokenizer_with_a_normalizer_gets_no_bound():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.normalizer = normalizers.NFKC()  # may shorten the text: bytes no longer bound tokens
    assert TokenBound.of(PreTrainedTokenizerFast(tokenizer_object=backend)) is None


def test_an_added_token_that_takes_whitespace_beside_it_gives_no_bound(tiny_model_dir):
    from tokenizers import AddedToken
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.add_tokens([AddedToken("<mask>", lstrip=True)])  # " <mask>" is one token: 7 bytes, not 6
    assert TokenBound.of(tokenizer) is None


def test_a_module_far_over_the_context_is_refused_by_the_bound(torch_engine):
    module = _long_module(1200)
    with pytest.raises(PromptTooLongError, match="at least"):  # the bound's words: it was not tokenized
        torch_engine.prompt_ids(module)


def test_the_event_loop_runs_while_a_long_module_is_prepared(torch_engine):
    """Normalizing a 1.2 MB module takes ~0.4 s (more on a loaded machine): it runs in the engine's prompt
    thread, so the loop (which answers the replica's health checks) keeps ticking meanwhile."""
    module = _long_module(1200)

    async def longest_pause() -> float:
        pauses = []

        async def tick():
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                pauses.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        with pytest.raises(PromptTooLongError):
            await torch_engine.generate(module, SamplingOptions())
        await asyncio.sleep(0.05)  # the ticker's next tick records a pause that lasted until now
        ticker.cancel()
        return max(pauses)

    started = time.monotonic()
    pause = asyncio.run(longest_pause())
    took = time.monotonic() - started
    assert pause < max(0.2, took / 3), f"the loop paused {pause:.2f} s of {took:.2f} s"
