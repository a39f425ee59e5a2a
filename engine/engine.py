"""`ModelEngine`: the `Engine` for one model directory (weights, tokenizer, profile.json), either backend.

generate(): IR -> prompt (profile) -> token ids -> strategy over a decode session (grammar-constrained,
KV-cached) -> answers -> parsed pass lists with log-probabilities and predicted instruction counts.

A prompt far longer than the model's context is refused before it is tokenized (`TokenBound`): tokenizing a
module of a megabyte takes seconds, only to find it hundreds of times longer than the context. Byte-level BPE
(a ByteLevel pre-tokenizer, no normalizer: what passlm/tokenizer.py trains) covers the text's bytes with
tokens, each token a run of its own bytes. Let `longest[b]` be the length in bytes of the longest token
(vocabulary or added) that holds byte b. A token of n bytes holds only bytes with `longest[b] >= n`, so the
sum of `1 / longest[b]` over its bytes is at most 1; summed over all the text's bytes it is therefore at most
the number of tokens. The bound is derived from the tokenizer's own vocabulary, so it holds for any
byte-level BPE tokenizer; for other tokenizers (a normalizer may shorten the text) `TokenBound.of` gives None
and the engine tokenizes.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optserve.engine.backend import Decoder, DecodeRequest
from optserve.engine.grammar import TokenGrammar
from optserve.engine.interface import Candidate, Generation, PromptTooLongError, SamplingOptions, Strategy
from optserve.engine.profile import ModelProfile, ParsedAnswer, encode_example
from optserve.engine.sampling import PriorityOptions, SearchResult, nucleus_sampling, priority_sampling

log = logging.getLogger(__name__)


_MAX_GRAMMARS = 16


class ModelEngine:
    def __init__(self, model_dir: str | Path, decoder: Decoder, context_length: int | None = None):
        from transformers import AutoTokenizer

        self.model_dir = Path(model_dir)
        self.profile = ModelProfile.load(self.model_dir)
        self.model_id = self.profile.model_id
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.token_bound = TokenBound.of(self.tokenizer)
        # Prompts are normalized and tokenized here, off the event loop: a long module takes seconds, and the
        # loop answers health checks meanwhile. One thread: HF tokenizers are not safe to share by threads.
        self._prompt_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-prompt")
        self.answer = self.profile.answer_format()
        self.decoder = decoder
        self.context_length = context_length
        self._grammars: dict[tuple, TokenGrammar] = {}
        for with_costs in (False, True):  # built at start-up, not on a first request's clock
            self.grammar(with_costs)

    @classmethod
    def load(cls, model_dir: str | Path, backend: str = "torch", **backend_options) -> ModelEngine:
        """`backend` "torch" (options: device, dtype) or "vllm" (options: see VllmDecoder)."""
        if backend == "torch":
            from optserve.engine.torch_backend import TorchDecoder

            decoder = TorchDecoder(model_dir, **backend_options)
            return cls(model_dir, decoder, decoder.context_length)
        if backend == "vllm":
            from optserve.engine.vllm_backend import VllmDecoder

            decoder = VllmDecoder(model_dir, **backend_options)
            return cls(model_dir, decoder, decoder.context_length)
        raise ValueError(f"unknown engine backend {backend!r}: use 'torch' or 'vllm'")

    def grammar(
        self, with_costs: bool, pass_lists: tuple[tuple[str, ...], ...] | None = None
    ) -> TokenGrammar:
        """The answer automaton (built once per form and list set; a few hundred ms for a small vocabulary).

        Restricted to `pass_lists` it is built on their first request (the service's are its coreset's, a
        handful of fixed sets).
        """
        with_costs = with_costs and self.answer.has_costs
        key = (with_costs, pass_lists)
        if key not in self._grammars:
            if len(self._grammars) >= _MAX_GRAMMARS:  # unbounded list sets would grow this without end
                self._grammars.pop(next(k for k in self._grammars if k[1] is not None))
            regex = self.answer.regex(with_costs, pass_lists)
            self._grammars[key] = TokenGrammar.build(regex, self.tokenizer)
        return self._grammars[key]

    def prompt_ids(
        self, ir: str, feedback: str | None = None, objective: str | None = None
    ) -> tuple[int, ...]:
        """The prompt's token ids; PromptTooLongError past the context (by the token bound, if it shows).

        `ir` is IR as LLVM prints it (`compiler.ir.parse_ir`'s text, what the service's intake gives): its
        normalization is then text work only (`normalized_lines`, the same text `normalize_ir` makes after
        its parse), so the engine never parses a user's IR with LLVM in its own process.
        Seconds for a megabyte module: `generate` runs it in the prompt thread.
        """
        if self.profile.normalize_ir:
            from optserve.compiler.ir import normalized_lines

            ir = normalized_lines(ir)
        prompt = self.profile.prompt(ir, feedback, objective)
        limit = self.profile.max_prompt_tokens or (
            self.context_length - self.profile.max_new_tokens if self.context_length else None
        )
        if limit is not None and self.token_bound is not None:  # far too long: known without tokenizing
            least = self.token_bound.least_tokens(prompt)
            if least > limit:
                raise PromptTooLongError(
                    f"the prompt has at least {least} tokens ({len(prompt.encode())} bytes); "
                    f"this model takes at most {limit}"
                )
        prompt_ids, _ = encode_example(self.profile, self.tokenizer, prompt)
        if limit is not None and len(prompt_ids) > limit:
            raise PromptTooLongError(
                f"the prompt has {len(prompt_ids)} tokens; this model takes at most {limit}"
            )
        return tuple(prompt_ids)

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None = None) -> Generation:
        deadline = options.deadline
        # Ranking a fixed set of lists skips the predicted costs: each branch would decode them, and such a
        # search expands many branches (one list, many spellings: sampling.PriorityOptions).
        grammar = self.grammar(options.predict_costs and not options.allowed_lists, options.allowed_lists)
        branching = min(options.top_k, options.max_branch or options.top_k)
        strategy = Strategy(options.strategy)
        prompt_ids = await asyncio.get_running_loop().run_in_executor(
            self._prompt_thread, self.prompt_ids, ir, feedback, options.objective
        )
        request = DecodeRequest(
            prompt_ids=prompt_ids,
            grammar=grammar,
            max_new_tokens=self.profile.max_new_tokens,
            top_k=branching if strategy is Strategy.PRIORITY else 1,
            deadline=deadline,
        )
        width = options.parallel if strategy is Strategy.PRIORITY else 1
        if strategy is Strategy.NUCLEUS:
            width = min(options.samples, 8)
        session = self.decoder.session(request, width=width)
        parsed: dict[tuple[int, ...], ParsedAnswer | None] = {}

        def parse(tokens: tuple[int, ...]) -> ParsedAnswer | None:
            if tokens not in parsed:
                try:
                    parsed[tokens] = self.answer.parse(grammar.decode(tokens))
                except ValueError as err:  # the grammar guarantees a pass list: this is a bug, not bad input
                    log.error("answer does not parse: %s", err)
                    parsed[tokens] = None
            return parsed[tokens]

        def identity(tokens: tuple[int, ...]) -> Hashable | None:
            answer = parse(tokens)
            return answer.pass_list if answer is not None else None

        def branchable(tokens: tuple[int, ...]) -> bool:
            return not self.answer.pass_list_closed(grammar.decode(tokens))

        try:
            if strategy is Strategy.NUCLEUS:
                result: SearchResult = await nucleus_sampling(
                    session, options.samples, options.temperature, options.top_p, options.seed,
                    identity, branchable, deadline,
                )  # fmt: skip
            else:
                search = PriorityOptions(
                    samples=options.samples if strategy is Strategy.PRIORITY else 1,
                    branching=branching if strategy is Strategy.PRIORITY else 1,
                    geometric=options.geometric_priority,
                    width=width,
                )
                result = await priority_sampling(session, search, identity, branchable, deadline)
            tokens_computed = session.tokens_computed
        finally:
            await session.close()
        candidates = []
        for sample in result.samples:
            answer = parse(sample.tokens)
            priority = None if strategy is Strategy.NUCLEUS else math.exp(sample.priority)
            candidates.append(
                Candidate(answer.pass_list, sample.logprob, answer.cost_before, answer.cost_after, priority)
            )
        return Generation(tuple(candidates), self.model_id, tokens_computed, result.deadline_hit)

    async def check_health(self) -> None:
        """Raise `DecoderDeadError` once the backend can no longer decode (its process died)."""
        await self.decoder.check_health()

    async def close(self) -> None:
        self._prompt_thread.shutdown(wait=False, cancel_futures=True)
        await self.decoder.close()


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table: `tokenizers`' ByteLevel writes vocabulary strings in it."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    for shift, b in enumerate(b for b in range(256) if b not in table):
        table[b] = chr(256 + shift)
    return table


@dataclass(frozen=True)
class TokenBound:
    weights: np.ndarray  # per byte value: 1 / bytes of the longest token holding it (0 if none holds it)

    @classmethod
    def of(cls, tokenizer) -> TokenBound | None:
        """The bound for a Hugging Face fast tokenizer; None unless byte-level BPE with no normalizer.

        Types are read by name: the runtime does not import `tokenizers` itself (tests/contracts).
        """
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if (
            backend is None
            or backend.normalizer is not None
            or type(backend.pre_tokenizer).__name__ != "ByteLevel"
            or type(backend.model).__name__ != "BPE"
        ):
            return None
        to_unicode = _bytes_to_unicode()
        if set(to_unicode.values()) != set(type(backend.pre_tokenizer).alphabet()):
            return None  # a `tokenizers` with another table: the vocabulary strings would be misread
        to_byte = {char: b for b, char in to_unicode.items()}
        added_tokens = list(tokenizer.added_tokens_decoder.values())
        if any(token.lstrip or token.rstrip for token in added_tokens):
            return None  # such a token also takes the whitespace beside it: more bytes than its own
        added = [token.content.encode() for token in added_tokens]
        longest = np.zeros(256)
        for piece in backend.get_vocab(with_added_tokens=False):
            if any(char not in to_byte for char in piece):
                return None
            data = bytes(to_byte[char] for char in piece)
            for b in set(data):
                longest[b] = max(longest[b], len(data))
        for data in added:
            for b in set(data):
                longest[b] = max(longest[b], len(data))
        # A byte no token holds counts for nothing: the bound holds whatever the tokenizer does with it.
        weights = np.divide(1.0, longest, out=np.zeros(256), where=longest > 0)
        return cls(weights)

    def least_tokens(self, text: str) -> int:
        """At most the number of tokens `text` encodes to (special tokens the tokenizer adds not counted)."""
        counts = np.bincount(np.frombuffer(text.encode(), dtype=np.uint8), minlength=256)
        # floor, less a hair for float rounding: the count itself is an integer at least the exact sum
        return max(0, int(np.floor(float(counts @ self.weights) - 1e-6)))

    @property
    def longest_token_bytes(self) -> int:
        return int(round(1 / self.weights[self.weights > 0].min()))
