"""The one seam between the service and a pass-ordering model: `Engine.generate`.

Backends (vLLM, torch/transformers) implement it; the service, the evaluation harness and the feedback loop
never learn which backend is behind it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Strategy(StrEnum):
    GREEDY = "greedy"
    PRIORITY = "priority"  # thesis Algorithm 1
    NUCLEUS = "nucleus"  # temperature / top-p sampling


@dataclass(frozen=True)
class SamplingOptions:
    strategy: Strategy = Strategy.GREEDY
    samples: int = 1  # unique candidates wanted
    top_k: int = 5  # alternatives pushed per decoding step (priority sampling)
    max_branch: int | None = None  # branches taken per sample path; None = unlimited
    geometric_priority: bool = False  # rank by geometric-mean token probability instead of the product
    temperature: float = 1.0  # nucleus only
    top_p: float = 1.0  # nucleus only
    seed: int = 0  # nucleus only; priority sampling needs none
    deadline_s: float | None = None  # wall-clock budget; return what was found when it runs out


@dataclass(frozen=True)
class Candidate:
    pass_list: tuple[str, ...]  # pass names as in optserve.compiler.passes, meta flag (if any) first
    logprob: float  # model log-probability of the pass-list tokens
    predicted_cost_before: int | None = None  # instruction counts the model wrote, if its format has them
    predicted_cost_after: int | None = None


@dataclass(frozen=True)
class Generation:
    candidates: tuple[Candidate, ...]  # unique, valid, in the order the strategy produced them
    model_id: str
    tokens_computed: int  # model tokens run through the network (prefix reuse makes this small)
    deadline_hit: bool = False


class Engine(Protocol):
    model_id: str

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None = None) -> Generation:
        """Unique valid pass lists for `ir` (normalized or not: the engine normalizes as its profile says).

        `feedback` is the compiler-feedback text of an earlier round (thesis ch. 5), appended to the prompt.
        """
        ...

    async def close(self) -> None: ...
