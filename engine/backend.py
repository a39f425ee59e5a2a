"""The seam between sampling strategies and model execution: grammar-constrained decoding with a KV cache.

A strategy asks a `DecodeSession` (one prompt, one grammar) for continuations of answer prefixes. The session
forces each prefix, then decodes greedily (or samples) under the grammar until the answer is complete, and
reports every new step with the best other allowed tokens. How the KV cache is reused along the search tree
is the backend's business: the torch backend forks and crops its own cache, vLLM uses prefix caching.

Log-probabilities are those of the grammar-masked distribution (the model's softmax restricted to tokens the
grammar allows next), which is what vLLM's `processed_logprobs` reports; both backends agree on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from optserve.deadline import Deadline
from optserve.engine.grammar import TokenGrammar


class DecoderDeadError(RuntimeError):
    """The backend can no longer decode (its engine or worker process died); only a new decoder recovers."""


@dataclass(frozen=True)
class DecodeRequest:
    prompt_ids: tuple[int, ...]
    grammar: TokenGrammar  # the whole answer's automaton
    max_new_tokens: int
    top_k: int  # best allowed tokens reported per step (the chosen one and top_k - 1 alternatives)
    deadline: Deadline | None = None  # when decoding gives up


@dataclass(frozen=True)
class Step:
    token: int
    logprob: float  # of `token`, under the grammar-masked distribution
    alternatives: tuple[tuple[int, float], ...]  # the other best allowed tokens with log-probs, best first


@dataclass(frozen=True)
class Continuation:
    prefix: tuple[int, ...]  # forced answer tokens
    steps: tuple[Step, ...]  # decoded after the prefix; a final EOS step only where the model chose EOS
    finished: bool  # the answer is complete (EOS, or nothing but EOS allowed); False: cut by length/deadline
    eos_token_id: int

    @property
    def tokens(self) -> tuple[int, ...]:
        """Answer tokens, EOS left out."""
        return self.prefix + tuple(s.token for s in self.steps if s.token != self.eos_token_id)


class DecodeSession(Protocol):
    tokens_computed: int  # tokens run through the model so far (prompt included, cache hits excluded)

    async def greedy(self, prefixes: Sequence[tuple[int, ...]]) -> list[Continuation]:
        """For each prefix: force it, then decode greedily under the grammar to the end of the answer.

        Several prefixes may run as one batch; results come back in the order of `prefixes`.
        """
        ...

    async def sample(self, count: int, temperature: float, top_p: float, seed: int) -> list[Continuation]:
        """`count` answers drawn at `temperature` with nucleus `top_p` under the grammar, seeded."""
        ...

    async def close(self) -> None: ...


class Decoder(Protocol):
    """A model behind the seam (torch/transformers or vLLM)."""

    def session(self, request: DecodeRequest, width: int = 1) -> DecodeSession:
        """A session for one prompt; `width` = how many sequences it should decode at once."""
        ...

    async def check_health(self) -> None:
        """Return if the backend can decode; raise `DecoderDeadError` once it never will again."""
        ...

    async def close(self) -> None: ...
