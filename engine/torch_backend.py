"""torch/transformers backend: grammar-constrained decoding over a KV cache shared along the search tree.

The prompt is prefilled once per session. Each of the session's `width` lanes is one sequence continuing the
prompt in a single batched `DynamicCache`. Moving a lane to a new prefix keeps the longest common prefix of
what it holds and feeds only the rest: a branch of priority sampling costs the tokens after its branching
point, not the whole prefix. With one lane the cache is cropped; with several, dropped positions become holes
that the attention mask hides (a batched cache cannot be cropped per row). CPU or GPU, fp32 by default.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from optserve.engine.backend import Continuation, DecodeRequest, Step


class TorchDecoder:
    """`threads`: intra-op threads on CPU (process-wide). One by default: the engine shares the cores with
    compiler workers, and oversubscribed OpenMP threads stall each other (measured here: greedy 0.5-2 s with
    one thread, 3-29 s with two, on a loaded 2-core machine)."""

    def __init__(
        self, model_dir: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32, threads: int = 1
    ):
        from transformers import AutoModelForCausalLM

        self.device = torch.device(device)
        if self.device.type == "cpu":
            torch.set_num_threads(threads)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
        self.model.to(self.device).eval()
        self.context_length = getattr(self.model.config, "max_position_embeddings", None)
        # One forward at a time: concurrent sessions would only fight for the cores.
        self.forward_lock = threading.Lock()

    def session(self, request: DecodeRequest, width: int = 1) -> TorchSession:
        return TorchSession(self, request, width)

    async def close(self) -> None:
        return None


class _Lanes:
    """`width` sequences continuing one prompt in one batched KV cache."""

    def __init__(self, decoder: TorchDecoder, prompt_ids: Sequence[int], width: int):
        self.decoder = decoder
        self.width = width
        self.prompt_len = len(prompt_ids)
        self.cache = _new_cache(decoder.model)
        self.valid = torch.zeros(1, 0, dtype=torch.bool, device=decoder.device)
        self.answers: list[list[int]] = [[]]  # answer tokens each lane holds
        self.slots: list[list[int]] = [[]]  # their cache positions
        self.tokens_computed = 0
        self.prompt_logits = self._forward_rows([list(prompt_ids)], positions_from=0)[0]
        if width > 1:
            self.cache.batch_repeat_interleave(width)
            self.valid = self.valid.repeat(width, 1)
            self.answers = [[] for _ in range(width)]
            self.slots = [[] for _ in range(width)]

    def truncate(self, lane: int, length: int) -> None:
        """Keep the first `length` answer tokens of `lane`."""
        dropped = self.slots[lane][length:]
        if not dropped:
            return
        if self.width == 1:  # contiguous: really crop
            self.cache.crop(-len(dropped))
            self.valid = self.valid[:, : dropped[0]]
        else:
            self.valid[lane, dropped] = False
        del self.answers[lane][length:], self.slots[lane][length:]

    def feed(self, feeds: list[list[int]]) -> list[torch.Tensor | None]:
        """Append `feeds[lane]` to each lane; next-token logits per lane (None for a lane fed nothing)."""
        return self._forward_rows(feeds, positions_from=None)

    def _forward_rows(self, feeds: list[list[int]], positions_from: int | None) -> list[torch.Tensor | None]:
        device = self.decoder.device
        batch, width = len(feeds), max(len(f) for f in feeds)
        past = self.valid.shape[1]
        input_ids = torch.zeros(batch, width, dtype=torch.long, device=device)
        positions = torch.zeros(batch, width, dtype=torch.long, device=device)
        new_valid = torch.zeros(batch, width, dtype=torch.bool, device=device)
        for lane, tokens in enumerate(feeds):
            start = self.prompt_len + len(self.answers[lane]) if positions_from is None else positions_from
            input_ids[lane, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            positions[lane] = torch.arange(start, start + width)
            new_valid[lane, : len(tokens)] = True
        self.valid = torch.cat([self.valid, new_valid], dim=1)
        # Query i (cache slot past+i) sees valid slots up to itself; holes and padding stay hidden.
        key_slots = torch.arange(past + width, device=device)
        query_slots = past + torch.arange(width, device=device)
        allowed = self.valid[:, None, None, :] & (
            key_slots[None, None, None, :] <= query_slots[None, None, :, None]
        )
        dtype = self.decoder.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(
            ~allowed, torch.finfo(dtype).min
        )
        with self.decoder.forward_lock:
            logits = self.decoder.model(
                input_ids=input_ids, position_ids=positions, attention_mask=mask, past_key_values=self.cache
            ).logits
        rows: list[torch.Tensor | None] = []
        for lane, tokens in enumerate(feeds):
            if positions_from is None:
                self.answers[lane].extend(tokens)
                self.slots[lane].extend(range(past, past + len(tokens)))
            self.tokens_computed += len(tokens)
            rows.append(logits[lane, len(tokens) - 1].float() if tokens else None)
        return rows


def _new_cache(model):
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def _top_allowed(logits: torch.Tensor, allowed: tuple[int, ...], k: int) -> list[tuple[int, float]]:
    """The k most likely allowed tokens with log-probs under the grammar-masked distribution, best first."""
    allowed_ids = torch.tensor(allowed, dtype=torch.long, device=logits.device)
    logprobs = logits[allowed_ids].log_softmax(dim=-1)
    values, order = logprobs.topk(min(k, len(allowed)))
    return list(zip(allowed_ids[order].tolist(), values.tolist(), strict=True))


def _nucleus_choice(logits, allowed, temperature, top_p, generator) -> tuple[int, float]:
    """Draw a token at `temperature` among the smallest set of allowed tokens holding `top_p` of the mass."""
    allowed_ids = torch.tensor(allowed, dtype=torch.long, device=logits.device)
    allowed_logits = logits[allowed_ids]
    probs = (allowed_logits / temperature).softmax(dim=-1).cpu()
    sorted_probs, order = probs.sort(descending=True, stable=True)
    outside = sorted_probs.cumsum(0) - sorted_probs >= top_p  # mass before this token already reaches top_p
    sorted_probs[outside] = 0.0
    pick = order[torch.multinomial(sorted_probs, 1, generator=generator)].item()
    return int(allowed_ids[pick]), float(allowed_logits.log_softmax(dim=-1)[pick])


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class TorchSession:
    def __init__(self, decoder: TorchDecoder, request: DecodeRequest, width: int):
        self.decoder = decoder
        self.request = request
        self.width = max(1, width)
        self._lanes: _Lanes | None = None

    @property
    def tokens_computed(self) -> int:
        return self._lanes.tokens_computed if self._lanes else 0

    async def greedy(self, prefixes: Sequence[tuple[int, ...]]) -> list[Continuation]:
        return await asyncio.to_thread(self._run_greedy, list(prefixes))

    async def sample(self, count: int, temperature: float, top_p: float, seed: int) -> list[Continuation]:
        return await asyncio.to_thread(self._run_sample, count, temperature, top_p, seed)

    async def close(self) -> None:
        self._lanes = None

    def _lanes_ready(self) -> _Lanes:
        if self._lanes is None:
            with torch.inference_mode():
                self._lanes = _Lanes(self.decoder, self.request.prompt_ids, self.width)
        return self._lanes

    def _run_greedy(self, prefixes: list[tuple[int, ...]]) -> list[Continuation]:
        results: list[Continuation] = []
        for start in range(0, len(prefixes), self.width):
            results += self._greedy_batch(prefixes[start : start + self.width])
        return results

    def _place(self, lanes: _Lanes, prefixes: list[tuple[int, ...]]) -> list[int]:
        """A lane per prefix, each the free lane sharing the longest prefix with it (first lane on ties)."""
        free = list(range(lanes.width))
        chosen = []
        for prefix in prefixes:
            lane = max(free, key=lambda i: (_common_prefix(lanes.answers[i], prefix), -i))
            free.remove(lane)
            chosen.append(lane)
        return chosen

    @torch.inference_mode()
    def _greedy_batch(self, prefixes: list[tuple[int, ...]]) -> list[Continuation]:
        request, grammar = self.request, self.request.grammar
        lanes = self._lanes_ready()
        lane_of = self._place(lanes, prefixes)
        feeds: list[list[int]] = [[] for _ in range(lanes.width)]
        logits: dict[int, torch.Tensor] = {}
        states: list[int | None] = []
        for prefix, lane in zip(prefixes, lane_of, strict=True):
            keep = min(_common_prefix(lanes.answers[lane], prefix), max(len(prefix) - 1, 0))
            lanes.truncate(lane, keep)
            feeds[lane] = list(prefix[keep:])
            if not prefix:
                logits[lane] = lanes.prompt_logits
            states.append(grammar.walk(prefix))
            if states[-1] is None:
                raise ValueError(f"forced prefix {prefix} is not allowed by the grammar")
        if any(feeds):
            for lane, row in enumerate(lanes.feed(feeds)):
                if row is not None:
                    logits[lane] = row
        steps: list[list[Step]] = [[] for _ in prefixes]
        finished = [False] * len(prefixes)
        active = set(range(len(prefixes)))
        while active:
            feeds = [[] for _ in range(lanes.width)]
            for i in sorted(active):
                state = states[i]
                if grammar.only_eos_allowed(state):
                    finished[i] = True
                    active.discard(i)
                    continue
                if len(prefixes[i]) + len(steps[i]) >= request.max_new_tokens or _past(request.deadline):
                    active.discard(i)
                    continue
                best = _top_allowed(logits[lane_of[i]], grammar.allowed_tokens(state), request.top_k)
                token, logprob = best[0]
                steps[i].append(Step(token, logprob, tuple(best[1:])))
                if token == grammar.eos_token_id:
                    finished[i] = True
                    active.discard(i)
                    continue
                states[i] = grammar.next_state(state, token)
                feeds[lane_of[i]] = [token]
            if any(feeds):
                for lane, row in enumerate(lanes.feed(feeds)):
                    if row is not None:
                        logits[lane] = row
        return [
            Continuation(tuple(p), tuple(s), f, grammar.eos_token_id)
            for p, s, f in zip(prefixes, steps, finished, strict=True)
        ]

    def _run_sample(self, count: int, temperature: float, top_p: float, seed: int) -> list[Continuation]:
        generator = torch.Generator().manual_seed(seed)
        results: list[Continuation] = []
        for start in range(0, count, self.width):
            results += self._sample_batch(min(self.width, count - start), temperature, top_p, generator)
        return results

    @torch.inference_mode()
    def _sample_batch(self, count, temperature, top_p, generator) -> list[Continuation]:
        request, grammar = self.request, self.request.grammar
        lanes = self._lanes_ready()
        for lane in range(count):
            lanes.truncate(lane, 0)
        logits = {lane: lanes.prompt_logits for lane in range(count)}
        states = [grammar.initial_state] * count
        steps: list[list[Step]] = [[] for _ in range(count)]
        finished = [False] * count
        active = set(range(count))
        while active:
            feeds = [[] for _ in range(lanes.width)]
            for i in sorted(active):
                if grammar.only_eos_allowed(states[i]):
                    finished[i] = True
                    active.discard(i)
                    continue
                if len(steps[i]) >= request.max_new_tokens or _past(request.deadline):
                    active.discard(i)
                    continue
                token, logprob = _nucleus_choice(
                    logits[i], grammar.allowed_tokens(states[i]), temperature, top_p, generator
                )
                steps[i].append(Step(token, logprob, ()))
                if token == grammar.eos_token_id:
                    finished[i] = True
                    active.discard(i)
                    continue
                states[i] = grammar.next_state(states[i], token)
                feeds[i] = [token]
            if any(feeds):
                for lane, row in enumerate(lanes.feed(feeds)):
                    if row is not None:
                        logits[lane] = row
        return [
            Continuation((), tuple(s), f, grammar.eos_token_id) for s, f in zip(steps, finished, strict=True)
        ]


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline
