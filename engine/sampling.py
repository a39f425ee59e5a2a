"""Sampling strategies: greedy, priority sampling (thesis ch. 6, Algorithm 1), its parallel variant, nucleus.

Strategies see only a `DecodeSession` (force a prefix, decode greedily or sample under the grammar) and
return answers as token sequences; the engine turns them into pass lists. Priority sampling reads top to
bottom as Algorithm 1:

    sample greedily; at every step push the other top-K allowed tokens, each with its prefix, on a priority
    queue keyed by its probability; the next sample replays the highest-priority prefix and continues
    greedily; repeat until N unique answers (or the queue is empty, or the deadline passes).

Every queue entry is a tree node not expanded before, so no two samples share all tokens; answers spelled by
different token sequences (a pass name split two ways) are removed by the caller's `identity`. Ties between
equal priorities go to the entry pushed first, so the result is deterministic. Branching happens only inside
the pass list (`branchable`): the instruction counts after it are decoded greedily and never branch.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from optserve.deadline import Deadline
from optserve.engine.backend import Continuation, DecodeSession


@dataclass(frozen=True)
class Sample:
    tokens: tuple[int, ...]  # answer tokens, EOS left out
    logprob: float  # sum of the branchable (pass-list) tokens' log-probs
    priority: float  # log priority it was drawn at: 0 for greedy; non-increasing along priority sampling


@dataclass
class SearchResult:
    samples: list[Sample]
    deadline_hit: bool = False
    queue_exhausted: bool = False  # the tree held fewer unique answers than asked for
    expansions_hit: bool = False  # stopped after `PriorityOptions.max_expansions` decoded branches


@dataclass(frozen=True)
class PriorityOptions:
    samples: int
    branching: int = 5  # children a node may get: the greedy one and branching - 1 alternatives
    geometric: bool = False  # key = geometric mean of the prefix's token probabilities, not the token's own
    width: int = 1  # queue heads expanded per batch; 1 = Algorithm 1 exactly
    # Decoded branches per wanted sample before the search gives up. One pass list can be spelled by many
    # token sequences (a pass name is one token or several): in a grammar of few lists (the coreset's) the
    # tree holds few unique answers behind very many spellings, and the search would walk them all.
    max_expansions_per_sample: int = 40


@dataclass(order=True, frozen=True)
class _Branch:
    """A queue entry: an unexpanded child of a tree node (heapq pops the smallest, hence the negated key)."""

    neg_key: float
    order: int  # push order: equal keys pop first-pushed first
    prefix: tuple[int, ...]
    prefix_logprobs: tuple[float, ...]
    priority: float  # effective priority: min(key, the priority of the sample it branches from)


Identity = Callable[[tuple[int, ...]], Hashable | None]  # dedup key of an answer; None = not a valid answer
Branchable = Callable[[tuple[int, ...]], bool]  # may the search branch after these answer tokens?


async def greedy(session: DecodeSession, identity: Identity, branchable: Branchable) -> SearchResult:
    return await priority_sampling(session, PriorityOptions(samples=1, branching=1), identity, branchable)


async def priority_sampling(
    session: DecodeSession,
    options: PriorityOptions,
    identity: Identity,
    branchable: Branchable,
    deadline: Deadline | None = None,
) -> SearchResult:
    """Algorithm 1 (width 1), or its batched form (width > 1: the best `width` queue heads at once)."""
    queue: list[_Branch] = []
    push_order = itertools.count()
    result = SearchResult(samples=[])
    seen: set[Hashable] = set()
    batch = [_Branch(0.0, next(push_order), (), (), 0.0)]  # the first sample is greedy
    expansions, max_expansions = 0, options.max_expansions_per_sample * options.samples
    while batch:
        expansions += len(batch)
        continuations = await session.greedy([branch.prefix for branch in batch])
        for branch, continuation in zip(batch, continuations, strict=True):
            tokens, logprobs = _push_alternatives(
                queue, push_order, branch, continuation, options, branchable
            )
            key = identity(continuation.tokens) if continuation.finished else None
            if key is not None and key not in seen and len(result.samples) < options.samples:
                seen.add(key)
                branch_len = _branchable_length(tokens, branchable)
                result.samples.append(
                    Sample(continuation.tokens, sum(logprobs[:branch_len]), branch.priority)
                )
        wanted = options.samples - len(result.samples)
        if wanted <= 0:
            break
        if deadline is not None and deadline.passed():
            result.deadline_hit = True
            break
        if expansions >= max_expansions:
            result.expansions_hit = True
            break
        batch = [heapq.heappop(queue) for _ in range(min(options.width, wanted, len(queue)))]
        result.queue_exhausted = not batch
    return result


def _push_alternatives(queue, push_order, branch: _Branch, continuation: Continuation, options, branchable):
    """Push the other top-K tokens of every newly decoded step; return the sample's tokens and log-probs."""
    tokens, logprobs = list(branch.prefix), list(branch.prefix_logprobs)
    for step in continuation.steps:
        if branchable(tuple(tokens)):
            for token, logprob in step.alternatives[: options.branching - 1]:
                key = (sum(logprobs) + logprob) / (len(logprobs) + 1) if options.geometric else logprob
                entry = _Branch(
                    -key,
                    next(push_order),
                    (*tokens, token),
                    (*logprobs, logprob),
                    min(key, branch.priority),
                )
                heapq.heappush(queue, entry)
        tokens.append(step.token)
        logprobs.append(step.logprob)
    return tokens, logprobs


def _branchable_length(tokens: Sequence[int], branchable: Branchable) -> int:
    """How many leading tokens belong to the pass list (the tokens decided while branching was allowed)."""
    length = 0
    while length < len(tokens) and branchable(tuple(tokens[:length])):
        length += 1
    return length


async def nucleus_sampling(
    session: DecodeSession,
    samples: int,
    temperature: float,
    top_p: float,
    seed: int,
    identity: Identity,
    branchable: Branchable,
    deadline: Deadline | None = None,
) -> SearchResult:
    """`samples` seeded draws at `temperature` / `top_p`; the unique valid ones in the order drawn."""
    continuations = await session.sample(samples, temperature, top_p, seed)
    result = SearchResult(samples=[], deadline_hit=deadline is not None and deadline.passed())
    seen: set[Hashable] = set()
    for continuation in continuations:
        key = identity(continuation.tokens) if continuation.finished else None
        if key is None or key in seen:
            continue
        seen.add(key)
        logprobs = [step.logprob for step in continuation.steps]
        branch_len = _branchable_length(continuation.tokens, branchable)
        result.samples.append(Sample(continuation.tokens, sum(logprobs[:branch_len]), float("nan")))
    return result
