"""vLLM backend: the same decode seam on `AsyncLLM` (the CPU build here; the same code serves GPUs).

- A continuation of an answer prefix is one vLLM request whose prompt is the prompt plus the prefix; prefix
  caching turns the shared part of the search tree into cache hits (whole KV blocks only).
- `GrammarLogitsProcessor` runs inside vLLM's engine process: per request it carries the forced answer
  prefix and the regex (`SamplingParams.extra_args["optserve"]`), walks the automaton over the prefix and
  the tokens generated so far, and masks every token the grammar does not allow next.
- `logprobs_mode="processed_logprobs"` makes vLLM report the top-K log-probs after that mask: the
  alternatives priority sampling pushes, with the same values the torch backend computes.
Several prefixes (parallel priority sampling, nucleus draws) are submitted together and vLLM batches them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from optserve.deadline import StoppedError
from optserve.engine.backend import Continuation, DecoderDeadError, DecodeRequest, Step
from optserve.engine.grammar import TokenGrammar

EXTRA_ARGS_KEY = "optserve"
# vLLM's CPU attention needs multiples of 32; smaller blocks let more of a branch's prefix hit the cache.
DEFAULT_BLOCK_SIZE = 32
MAX_CACHED_MASKS = 4096
# vLLM's EngineDeadError says only "see the stack trace above"; callers get what it means for them.
_ENGINE_DIED = "the vLLM engine core or its worker process died (killed, or out of memory)"


class _RowGrammar:
    """One request's automaton position: prefix forced through the prompt, then the tokens it generated."""

    def __init__(self, grammar: TokenGrammar, prefix: Sequence[int], output_ids: list[int]):
        self.grammar = grammar
        self.output_ids = output_ids  # vLLM's running list of this request's generated tokens
        self.state = grammar.walk(prefix)
        self.consumed = 0

    def current_state(self) -> int | None:
        while self.consumed < len(self.output_ids) and self.state is not None:
            self.state = self.grammar.next_state(self.state, self.output_ids[self.consumed])
            self.consumed += 1
        return self.state


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks tokens the request's regex does not allow next (requests without `optserve` extra args pass)."""

    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool):
        self.tokenizer_path = vllm_config.model_config.tokenizer
        self.device = device
        self._tokenizer = None
        self._grammars: dict[str, TokenGrammar] = {}
        self._masks: dict[tuple[str, int], torch.Tensor] = {}
        self._rows: dict[int, _RowGrammar] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it changes greedy choices, so vLLM must also run it for greedy requests

    def _grammar(self, regex: str) -> TokenGrammar:
        if regex not in self._grammars:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path)
            self._grammars[regex] = TokenGrammar.build(regex, self._tokenizer)
        return self._grammars[regex]

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self._rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            spec = (params.extra_args or {}).get(EXTRA_ARGS_KEY) if params is not None else None
            if spec is None:
                self._rows.pop(index, None)
            else:
                self._rows[index] = _RowGrammar(self._grammar(spec["regex"]), spec["prefix"], output_ids)
        for first, second, direction in batch_update.moved:
            a, b = self._rows.pop(first, None), self._rows.pop(second, None)
            if a is not None:
                self._rows[second] = a
            if b is not None and direction == MoveDirectionality.SWAP:
                self._rows[first] = b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, row in self._rows.items():
            state = row.current_state()
            if state is None:  # cannot happen while the mask holds; end the request rather than emit junk
                logits[index].fill_(float("-inf"))
                logits[index, row.grammar.eos_token_id] = 0.0
                continue
            logits[index].masked_fill_(self._disallowed(row.grammar, state, logits.shape[1]), float("-inf"))
        return logits

    def _disallowed(self, grammar: TokenGrammar, state: int, vocab_size: int) -> torch.Tensor:
        """True for every token `state` does not allow (built once per state, not per step)."""
        key = (grammar.regex, state)
        mask = self._masks.get(key)
        if mask is None:
            if len(self._masks) >= MAX_CACHED_MASKS:  # a vocabulary-sized tensor each: bound the memory
                self._masks.clear()
            mask = torch.ones(vocab_size, dtype=torch.bool)
            mask[list(grammar.allowed_tokens(state))] = False
            mask = mask.to(self.device)
            self._masks[key] = mask
        return mask


def _shield_llvmlite_from_vllm_kernel_scan() -> None:
    """Let vLLM start in a process that has llvmlite loaded (the service's compiler core, the test session).

    vLLM's CPU worker scans every loaded module for Triton kernels and reads `vars(x)` of anything with a
    `__dict__` (vllm/triton_utils/dispatcher.py, `_rebind_kernels`); forked workers inherit our modules.
    llvmlite's `ffi.lib` answers the `__dict__` lookup through its lazy symbol table with a function wrapper,
    and the scan crashes the worker. A plain dict in that table is what the scan expects.
    """
    ffi = sys.modules.get("llvmlite.binding.ffi")
    if ffi is not None:
        ffi.lib._fntab.setdefault("__dict__", {})


# Also at import: vLLM's engine process imports this module (for the logits processor) before it starts the
# worker, and in a spawned engine process llvmlite may already be loaded by then.
_shield_llvmlite_from_vllm_kernel_scan()


class VllmDecoder:
    """An `AsyncLLM` serving one model directory with the grammar logits processor installed."""

    def __init__(
        self,
        model_dir: str | Path,
        max_logprobs: int = 20,
        block_size: int = DEFAULT_BLOCK_SIZE,
        dtype: str = "float32",
        max_model_len: int | None = None,
        kv_cache_gib: int = 1,
        **engine_args,
    ):
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        _shield_llvmlite_from_vllm_kernel_scan()
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(
            model=str(model_dir),
            dtype=dtype,
            enforce_eager=True,
            enable_prefix_caching=True,
            block_size=block_size,
            logprobs_mode="processed_logprobs",
            max_logprobs=max_logprobs,
            max_model_len=max_model_len,
            logits_processors=[GrammarLogitsProcessor],
            disable_log_stats=True,
            **engine_args,
        )
        self.engine = AsyncLLM.from_engine_args(args)
        self.context_length = self.engine.model_config.max_model_len
        self.max_logprobs = max_logprobs
        self._request_ids = itertools.count()

    def session(self, request: DecodeRequest, width: int = 1) -> VllmSession:
        if request.top_k > self.max_logprobs:
            raise ValueError(f"top_k {request.top_k} exceeds this engine's max_logprobs {self.max_logprobs}")
        return VllmSession(self, request)

    def next_request_id(self) -> str:
        return f"optserve-{os.getpid()}-{next(self._request_ids)}"

    async def check_health(self) -> None:
        from vllm.v1.engine.exceptions import EngineDeadError

        if self.engine is None:
            raise DecoderDeadError("the vLLM engine was shut down")
        try:
            await self.engine.check_health()
        except EngineDeadError:
            raise DecoderDeadError(_ENGINE_DIED) from None

    async def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()


class VllmSession:
    def __init__(self, decoder: VllmDecoder, request: DecodeRequest):
        self.decoder = decoder
        self.request = request
        self.tokens_computed = 0

    async def greedy(self, prefixes: Sequence[tuple[int, ...]]) -> list[Continuation]:
        return list(await asyncio.gather(*(self._run(tuple(p), temperature=0.0) for p in prefixes)))

    async def sample(self, count: int, temperature: float, top_p: float, seed: int) -> list[Continuation]:
        runs = (self._run((), temperature=temperature, top_p=top_p, seed=seed + i) for i in range(count))
        return list(await asyncio.gather(*runs))

    async def close(self) -> None:
        return None

    async def _run(
        self, prefix: tuple[int, ...], temperature: float, top_p: float = 1.0, seed=None
    ) -> Continuation:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        request, grammar = self.request, self.request.grammar
        unfinished = Continuation(prefix, (), False, grammar.eos_token_id)
        budget = request.max_new_tokens - len(prefix)
        state = grammar.walk(prefix)
        if state is None:
            raise ValueError(f"forced prefix {prefix} is not allowed by the grammar")
        if grammar.only_eos_allowed(state):
            return Continuation(prefix, (), True, grammar.eos_token_id)
        if budget <= 0:
            return unfinished
        params = SamplingParams(
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            max_tokens=budget,
            logprobs=request.top_k,
            output_kind=RequestOutputKind.FINAL_ONLY,
            extra_args={EXTRA_ARGS_KEY: {"regex": grammar.regex, "prefix": list(prefix)}},
        )
        request_id = self.decoder.next_request_id()
        prompt = TokensPrompt(prompt_token_ids=[*request.prompt_ids, *prefix])
        final = self._final(prompt, params, request_id)
        try:
            output = await (final if request.deadline is None else request.deadline.within(final, "decoding"))
        except StoppedError:
            await self.decoder.engine.abort(request_id)
            return unfinished
        completion = output.outputs[0]
        self.tokens_computed += len(prompt["prompt_token_ids"]) - (output.num_cached_tokens or 0)
        self.tokens_computed += max(len(completion.token_ids) - 1, 0)
        return self._continuation(prefix, state, completion)

    async def _final(self, prompt, params, request_id):
        from vllm.v1.engine.exceptions import EngineDeadError

        final = None
        try:
            async for output in self.decoder.engine.generate(prompt, params, request_id):
                final = output
        except EngineDeadError:
            raise DecoderDeadError(_ENGINE_DIED) from None
        return final

    def _continuation(self, prefix, state, completion) -> Continuation:
        grammar = self.request.grammar
        steps = []
        finished = False
        for position, token in enumerate(completion.token_ids):
            if grammar.only_eos_allowed(state):  # torch stops here without asking the model; so do we
                finished = True
                break
            ranked = sorted(completion.logprobs[position].items(), key=lambda kv: -kv[1].logprob)
            chosen = next(lp.logprob for t, lp in ranked if t == token)
            alternatives = tuple(
                (t, lp.logprob)
                for t, lp in ranked[: self.request.top_k]
                if t != token and lp.logprob > -float("inf")
            )
            steps.append(Step(token, chosen, alternatives))
            if token == grammar.eos_token_id:
                finished = True
                break
            state = grammar.next_state(state, token)
        else:
            finished = state is not None and grammar.only_eos_allowed(state)
        return Continuation(prefix, tuple(steps), finished, grammar.eos_token_id)
