"""torch/transformers backend: grammar-constrained decoding over a KV cache shared along the search tree.

The prompt is prefilled once per session. Each of the session's `width` lanes is one sequence continuing the
prompt in a single batched KV cache (`CompactLlama`'s for Llama models, transformers' `DynamicCache` else).
Moving a lane to a new prefix keeps the longest common prefix of what it holds and feeds only the rest: a
branch of priority sampling costs the tokens after its branching point, not the whole prefix. With one lane
the cache is cropped; with several, dropped positions become holes that the attention mask hides (a batched
cache cannot be cropped per row). CPU or GPU, fp32 by default.
Each step computes logits only for the tokens the grammar allows (`_GrammarHeads`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import torch
import torch.nn.functional as F

from optserve.deadline import Deadline
from optserve.engine.backend import Continuation, DecodeRequest, Step
from optserve.engine.grammar import TokenGrammar
from optserve.engine.llama_forward import CompactLlama


def pick_device(name: str = "auto") -> torch.device:
    """The device a model runs on: `name` as torch spells it, or "auto": CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class TorchDecoder:
    """`threads`: intra-op threads on CPU (process-wide). One by default: the engine shares the cores with
    compiler workers, and oversubscribed OpenMP threads stall each other (measured here: greedy 0.5-2 s with
    one thread, 3-29 s with two, on a loaded 2-core machine).

    `compact`: run Llama models through `CompactLlama` (same network, a fraction of the per-step overhead);
    other architectures, or `compact=False`, use transformers' own forward.

    `device` "auto" (the default) is the first CUDA GPU when torch sees one, else the CPU; `dtype` None is
    bfloat16 on a GPU (its tensor cores' type; the pretrained models were trained in it) and float32 on the
    CPU (bfloat16 matmuls there are slower than float32 on most CPUs without AMX).
    """

    def __init__(
        self,
        model_dir: str | Path,
        device: str = "auto",
        dtype: torch.dtype | None = None,
        threads: int = 1,
        compact: bool = True,
    ):
        from transformers import AutoModelForCausalLM

        self.device = pick_device(device)
        if dtype is None:
            dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        if self.device.type == "cpu":
            torch.set_num_threads(threads)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
        self.model.to(self.device).eval()
        self.context_length = getattr(self.model.config, "max_position_embeddings", None)
        if compact and CompactLlama.supports(self.model):
            self.network: _Network = _CompactNetwork(CompactLlama(self.model))
        else:
            self.network = _TransformersNetwork(self.model)
        self.heads = _GrammarHeads(self.model)
        # One forward at a time: concurrent sessions would only fight for the cores.
        self.forward_lock = threading.Lock()

    def session(self, request: DecodeRequest, width: int = 1) -> TorchSession:
        return TorchSession(self, request, width)

    async def check_health(self) -> None:
        return None  # the model runs in this process: if it dies, so does its host (Ray Serve sees that)

    async def close(self) -> None:
        return None


class _Network(Protocol):
    """A model's forward pass over a KV cache of its own kind, returning final hidden states (no head)."""

    def new_cache(self, capacity: int): ...

    def forward(self, cache, input_ids, positions, valid: torch.Tensor | None) -> torch.Tensor:
        """Append `input_ids` [rows, T]; hidden states [rows, T, hidden]. `valid` [rows, slots + T]: the cache
        slots each row may see (None: every slot); causality among the new tokens is the network's job."""
        ...

    def repeat_rows(self, cache, rows: int) -> None: ...

    def crop(self, cache, length: int) -> None: ...


class _CompactNetwork:
    def __init__(self, llama: CompactLlama):
        self.llama = llama

    def new_cache(self, capacity: int):
        return self.llama.new_cache(capacity)

    def forward(self, cache, input_ids, positions, valid):
        return self.llama.forward(cache, input_ids, positions, valid)

    def repeat_rows(self, cache, rows: int) -> None:
        cache.repeat_rows(rows)

    def crop(self, cache, length: int) -> None:
        cache.length = length


class _TransformersNetwork:
    """Any causal LM through transformers (a `DynamicCache`, an additive 4-D mask)."""

    def __init__(self, model):
        self.model = model

    def new_cache(self, capacity: int):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def forward(self, cache, input_ids, positions, valid):
        rows, new = input_ids.shape
        device = input_ids.device
        past = cache.get_seq_length()
        if valid is None:
            valid = torch.ones(rows, past + new, dtype=torch.bool, device=device)
        key_slots = torch.arange(past + new, device=device)
        query_slots = past + torch.arange(new, device=device)
        causal = key_slots[None, None, None, :] <= query_slots[None, None, :, None]
        allowed = valid[:, None, None, :] & causal
        dtype = self.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(
            ~allowed, torch.finfo(dtype).min
        )
        decoder = self.model.get_decoder()
        output = decoder(
            input_ids=input_ids, position_ids=positions, attention_mask=mask, past_key_values=cache
        )
        return output.last_hidden_state

    def repeat_rows(self, cache, rows: int) -> None:
        cache.batch_repeat_interleave(rows)

    def crop(self, cache, length: int) -> None:
        excess = cache.get_seq_length() - length
        if excess > 0:  # crop(-n) drops the last n positions (crop(0) would drop them all)
            cache.crop(-excess)


class _GrammarHeads:
    """The language-model head restricted to the tokens a grammar state allows, cached per state.

    Priority sampling and nucleus sampling only read the grammar-masked distribution, so the logits of
    disallowed tokens are never needed: a step multiplies the hidden state by a few dozen rows of the head
    instead of the whole vocabulary (the largest matmul of a small model's step).
    """

    def __init__(self, model):
        head = model.get_output_embeddings()
        if getattr(model.config, "final_logit_softcapping", None):
            raise ValueError("models with logit soft-capping are not supported by the torch backend")
        self.weight = head.weight
        self.bias = head.bias
        self._rows: dict[tuple[int, int], tuple[list[int], torch.Tensor, torch.Tensor | None]] = {}
        self._grammars: dict[int, TokenGrammar] = {}  # held, so that no other grammar can reuse an id

    def allowed_logits(self, grammar: TokenGrammar, state: int, hidden: torch.Tensor):
        """(allowed token ids as a list, their logits) for `hidden` [hidden_size] in `state`."""
        key = (id(grammar), state)
        rows = self._rows.get(key)
        if rows is None:
            if len(self._rows) >= MAX_CACHED_HEADS:
                self._rows.clear()
                self._grammars.clear()
            self._grammars[id(grammar)] = grammar
            allowed = list(grammar.allowed_tokens(state))
            ids = torch.tensor(allowed, dtype=torch.long, device=self.weight.device)
            rows = (allowed, self.weight[ids], self.bias[ids] if self.bias is not None else None)
            self._rows[key] = rows
        id_list, weight, bias = rows
        logits = F.linear(hidden.to(weight.dtype), weight, bias).float()
        return id_list, logits


MAX_CACHED_HEADS = 4096  # (grammar, state) pairs whose head rows are kept


class _Lanes:
    """`width` sequences continuing one prompt in one batched KV cache."""

    def __init__(self, decoder: TorchDecoder, prompt_ids: Sequence[int], width: int, max_new_tokens: int):
        self.decoder = decoder
        self.network = decoder.network
        self.width = width
        self.prompt_len = len(prompt_ids)
        self.cache = self.network.new_cache(self.prompt_len + max_new_tokens)
        self.valid = torch.zeros(1, 0, dtype=torch.bool, device=decoder.device)
        self.answers: list[list[int]] = [[]]  # answer tokens each lane holds
        self.slots: list[list[int]] = [[]]  # their cache positions
        self.tokens_computed = 0
        self.prompt_hidden = self._forward_rows([list(prompt_ids)], positions_from=0)[0]
        if width > 1:
            self.network.repeat_rows(self.cache, width)
            self.valid = self.valid.repeat(width, 1)
            self.answers = [[] for _ in range(width)]
            self.slots = [[] for _ in range(width)]

    def truncate(self, lane: int, length: int) -> None:
        """Keep the first `length` answer tokens of `lane`."""
        dropped = self.slots[lane][length:]
        if not dropped:
            return
        if self.width == 1:  # contiguous: really crop
            self.network.crop(self.cache, dropped[0])
            self.valid = self.valid[:, : dropped[0]]
        else:
            self.valid[lane, dropped] = False
        del self.answers[lane][length:], self.slots[lane][length:]

    def feed(self, feeds: list[list[int]]) -> list[torch.Tensor | None]:
        """Append `feeds[lane]` to each lane; last hidden state per lane (None for a lane fed nothing)."""
        return self._forward_rows(feeds, positions_from=None)

    def _forward_rows(self, feeds: list[list[int]], positions_from: int | None) -> list[torch.Tensor | None]:
        device = self.decoder.device
        batch, width = len(feeds), max(len(f) for f in feeds)
        past = self.valid.shape[1]
        input_ids = torch.zeros(batch, width, dtype=torch.long)
        positions = torch.zeros(batch, width, dtype=torch.long)
        new_valid = torch.zeros(batch, width, dtype=torch.bool)
        for lane, tokens in enumerate(feeds):
            start = self.prompt_len + len(self.answers[lane]) if positions_from is None else positions_from
            input_ids[lane, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            positions[lane, : len(tokens)] = torch.arange(start, start + len(tokens))  # padding: hidden, at 0
            new_valid[lane, : len(tokens)] = True
        self.valid = torch.cat([self.valid, new_valid.to(device)], dim=1)
        # One row, no holes (a single lane is cropped, never holed): every slot is visible.
        valid = None if batch == 1 else self.valid
        with self.decoder.forward_lock:
            hidden = self.network.forward(self.cache, input_ids.to(device), positions.to(device), valid)
        rows: list[torch.Tensor | None] = []
        for lane, tokens in enumerate(feeds):
            if positions_from is None:
                self.answers[lane].extend(tokens)
                self.slots[lane].extend(range(past, past + len(tokens)))
            self.tokens_computed += len(tokens)
            rows.append(hidden[lane, len(tokens) - 1] if tokens else None)
        return rows


def _top_k(allowed: list[int], logits: torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The k most likely of the `allowed` tokens (their `logits`) with log-probs under the grammar-masked
    distribution, best first."""
    logprobs = logits.log_softmax(dim=-1)
    values, order = logprobs.topk(min(k, len(allowed)))
    return [(allowed[i], v) for i, v in zip(order.tolist(), values.tolist(), strict=True)]


def _nucleus_choice(allowed: list[int], logits, temperature, top_p, generator) -> tuple[int, float]:
    """Draw a token at `temperature` among the smallest set of allowed tokens holding `top_p` of the mass."""
    probs = (logits / temperature).softmax(dim=-1).cpu()
    sorted_probs, order = probs.sort(descending=True, stable=True)
    outside = sorted_probs.cumsum(0) - sorted_probs >= top_p  # mass before this token already reaches top_p
    sorted_probs[outside] = 0.0
    pick = order[torch.multinomial(sorted_probs, 1, generator=generator)].item()
    return allowed[pick], float(logits.log_softmax(dim=-1)[pick])


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
                request = self.request
                self._lanes = _Lanes(self.decoder, request.prompt_ids, self.width, request.max_new_tokens)
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
        request, grammar, heads = self.request, self.request.grammar, self.decoder.heads
        lanes = self._lanes_ready()
        lane_of = self._place(lanes, prefixes)
        feeds: list[list[int]] = [[] for _ in range(lanes.width)]
        hidden: dict[int, torch.Tensor] = {}
        states: list[int | None] = []
        for prefix, lane in zip(prefixes, lane_of, strict=True):
            keep = min(_common_prefix(lanes.answers[lane], prefix), max(len(prefix) - 1, 0))
            lanes.truncate(lane, keep)
            feeds[lane] = list(prefix[keep:])
            if not prefix:
                hidden[lane] = lanes.prompt_hidden
            states.append(grammar.walk(prefix))
            if states[-1] is None:
                raise ValueError(f"forced prefix {prefix} is not allowed by the grammar")
        if any(feeds):
            for lane, row in enumerate(lanes.feed(feeds)):
                if row is not None:
                    hidden[lane] = row

        def choose(state: int, row: torch.Tensor) -> Step:
            allowed, logits = heads.allowed_logits(grammar, state, row)
            best = _top_k(allowed, logits, request.top_k)
            return Step(best[0][0], best[0][1], tuple(best[1:]))

        steps, finished = self._decode(lanes, lane_of, [len(p) for p in prefixes], states, hidden, choose)
        return [
            Continuation(tuple(p), tuple(s), f, grammar.eos_token_id)
            for p, s, f in zip(prefixes, steps, finished, strict=True)
        ]

    def _decode(self, lanes, lane_of, forced_lengths, states, hidden, choose):
        """Decode every sequence i (in lane `lane_of[i]`, grammar state `states[i]`, next-token hidden state
        in `hidden[lane]`) to the end of its answer, `choose` picking each token the grammar leaves open.

        A token the grammar forces (the only one allowed) is taken without reading the model: its masked
        log-prob is 0 and it has no alternatives, exactly what a model step would report. It is fed together
        with the token before it, so a run of forced tokens costs one forward, not one each. An answer the
        grammar closes (only EOS left) ends without feeding its last token.
        """
        request, grammar = self.request, self.request.grammar
        steps: list[list[Step]] = [[] for _ in states]
        finished = [False] * len(states)
        active = set(range(len(states)))
        while active:
            feeds: list[list[int]] = [[] for _ in range(lanes.width)]
            for i in sorted(active):
                state, feed = states[i], []
                while True:
                    if grammar.only_eos_allowed(state):
                        finished[i] = True
                        break
                    if forced_lengths[i] + len(steps[i]) >= request.max_new_tokens or _past(request.deadline):
                        break
                    allowed = grammar.allowed_tokens(state)
                    if len(allowed) == 1:
                        step = Step(allowed[0], 0.0, ())
                    elif feed:  # the model must read what was chosen before it can choose again
                        break
                    else:
                        step = choose(state, hidden[lane_of[i]])
                    steps[i].append(step)
                    if step.token == grammar.eos_token_id:
                        finished[i] = True
                        break
                    state = grammar.next_state(state, step.token)
                    feed.append(step.token)
                states[i] = state
                length = forced_lengths[i] + len(steps[i])
                if finished[i] or length >= request.max_new_tokens or _past(request.deadline):
                    active.discard(i)
                else:
                    feeds[lane_of[i]] = feed
            if any(feeds):
                for lane, row in enumerate(lanes.feed(feeds)):
                    if row is not None:
                        hidden[lane] = row
        return steps, finished

    def _run_sample(self, count: int, temperature: float, top_p: float, seed: int) -> list[Continuation]:
        generator = torch.Generator().manual_seed(seed)
        results: list[Continuation] = []
        for start in range(0, count, self.width):
            results += self._sample_batch(min(self.width, count - start), temperature, top_p, generator)
        return results

    @torch.inference_mode()
    def _sample_batch(self, count, temperature, top_p, generator) -> list[Continuation]:
        grammar, heads = self.request.grammar, self.decoder.heads
        lanes = self._lanes_ready()
        for lane in range(count):
            lanes.truncate(lane, 0)
        hidden = {lane: lanes.prompt_hidden for lane in range(count)}
        states = [grammar.initial_state] * count

        def choose(state: int, row: torch.Tensor) -> Step:
            allowed, logits = heads.allowed_logits(grammar, state, row)
            return Step(*_nucleus_choice(allowed, logits, temperature, top_p, generator), ())

        steps, finished = self._decode(lanes, list(range(count)), [0] * count, states, hidden, choose)
        return [
            Continuation((), tuple(s), f, grammar.eos_token_id) for s, f in zip(steps, finished, strict=True)
        ]


def _past(deadline: Deadline | None) -> bool:
    return deadline is not None and deadline.passed()
