"""The one seam between the service and a pass-ordering model: `Engine.generate`.

`ModelEngine` (engine/engine.py) implements it over either backend (vLLM, torch/transformers); the service
reaches it through a Ray deployment handle with the same method (serve/replicas/handles.py). The service, the
evaluation harness and the feedback loop never learn which backend is behind it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from optserve.deadline import Deadline
from optserve.strategies import ServedStrategy


class Strategy(StrEnum):
    """The served strategies a model decodes (optserve/strategies.py names them all)."""

    GREEDY = ServedStrategy.GREEDY.value
    PRIORITY = ServedStrategy.PRIORITY.value  # thesis Algorithm 1
    NUCLEUS = ServedStrategy.NUCLEUS.value  # temperature / top-p sampling


@dataclass(frozen=True)
class SamplingOptions:
    strategy: Strategy = Strategy.GREEDY
    samples: int = 1  # unique candidates wanted (nucleus: draws, of which the unique ones are returned)
    top_k: int = 5  # K: best allowed tokens read per step; the other K-1 are pushed (priority sampling)
    max_branch: int | None = None  # children one tree node may get (thesis ablation: 3, 5); None = K
    geometric_priority: bool = False  # key: geometric mean of the path's token probabilities
    parallel: int = 1  # priority sampling: queue heads expanded together as one batch (1 = Algorithm 1)
    temperature: float = 1.0  # nucleus only
    top_p: float = 1.0  # nucleus only
    seed: int = 0  # nucleus only; priority sampling needs none
    # When to return what was found: an instant of this process's clock, so time spent before the engine
    # starts (queued at its replica) counts. Crossing a process it travels as wall-clock time
    # (serve/replicas/handles.py EngineClient, deployments.py PassOrderingEngine).
    deadline: Deadline | None = None
    predict_costs: bool = True  # also decode the instruction counts the model predicts, if it writes them
    objective: str | None = None  # what the candidates are for, if the model's prompt names it (profile)
    # Only these pass lists (e.g. the coreset's): the strategy then ranks them by the model's probability
    # (without predicted costs).
    allowed_lists: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        checks = {
            "samples must be >= 1": self.samples >= 1,
            "top_k must be >= 1": self.top_k >= 1,
            "max_branch must be >= 1": self.max_branch is None or self.max_branch >= 1,
            "parallel must be >= 1": self.parallel >= 1,
            "temperature must be > 0": self.temperature > 0,
            "top_p must be in (0, 1]": 0 < self.top_p <= 1,
            "allowed_lists must not be empty": self.allowed_lists is None or len(self.allowed_lists) > 0,
        }
        for message, ok in checks.items():
            if not ok:
                raise ValueError(message)


@dataclass(frozen=True)
class Candidate:
    pass_list: tuple[str, ...]  # pass names as in optserve.compiler.passes, meta flag (if any) first
    logprob: float  # model log-probability of the pass-list tokens
    predicted_cost_before: int | None = None  # instruction counts the model wrote, if its format has them
    predicted_cost_after: int | None = None
    priority: float | None = None  # priority sampling: the priority it was drawn at (greedy: 1)


@dataclass(frozen=True)
class Generation:
    candidates: tuple[Candidate, ...]  # unique, valid, in the order the strategy produced them
    model_id: str
    tokens_computed: int  # model tokens run through the network (prefix reuse makes this small)
    deadline_hit: bool = False


class PromptTooLongError(ValueError):
    """The IR does not fit the model's context; callers fall back to other lists (the coreset's, -Oz)."""


class Engine(Protocol):
    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None = None) -> Generation:
        """Unique valid pass lists for `ir` (normalized or not: the engine normalizes as its profile says).

        `feedback` is the compiler-feedback text of an earlier round (thesis ch. 5), appended to the prompt.
        Raises `PromptTooLongError` for an input longer than the model's context.
        """
        ...
