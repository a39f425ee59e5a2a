"""What an evaluated method is (greedy, priority, nucleus-T, ranked, random, coreset, autotuner) and the
configuration of a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optserve.objectives import Objective

# "ranked": priority sampling restricted to the coreset's lists (the service's strategy ranked_coreset)
MODEL_STRATEGIES = ("greedy", "priority", "nucleus", "ranked")
DEFAULT_METHODS = "greedy,priority,nucleus-0.8,nucleus-1.2,random,autotuner"
DEFAULT_SAMPLES = (1, 3, 5, 10, 30, 100)
RANDOM_MAX_PASSES = 8  # as the autotuner draws them (optserve.compiler.autotune)


@dataclass(frozen=True)
class Method:
    """One row family of the table: greedy, priority, nucleus-T (temperature T), random, coreset,
    autotuner."""

    name: str
    kind: str
    temperature: float = 1.0

    @classmethod
    def parse(cls, name: str) -> Method:
        kind, _, suffix = name.partition("-")
        if kind == "nucleus":
            try:
                temperature = float(suffix)
            except ValueError:
                raise ValueError(f"nucleus needs a temperature, e.g. nucleus-1.2 (got {name!r})") from None
            if temperature <= 0:
                raise ValueError(f"{name}: the temperature must be > 0")
            return cls(name, kind, temperature)
        if suffix or kind not in (*MODEL_STRATEGIES, "random", "coreset", "autotuner"):
            raise ValueError(
                f"unknown method {name!r}: choose from greedy, priority, nucleus-T, ranked, random, coreset, "
                "autotuner"
            )
        return cls(name, kind)

    @property
    def uses_model(self) -> bool:
        return self.kind in MODEL_STRATEGIES

    @property
    def single_answer(self) -> bool:
        return self.kind in ("greedy", "autotuner")

    def sample_counts(self, samples: Sequence[int]) -> tuple[int, ...]:
        """The n this method is reported at: greedy and the autotuner have one answer."""
        return (1,) if self.single_answer else tuple(samples)

    def draws(self, max_samples: int) -> int:
        """Candidates to draw (once, for every n)."""
        return 1 if self.single_answer else max_samples

    @property
    def draws_per_n(self) -> bool:
        """Nucleus sampling at n is n draws, of which the unique ones count (thesis): the engine returns
        unique candidates, not draws, and draws of different counts are not prefixes of each other, so each
        n is drawn on its own (with the same seed)."""
        return self.kind == "nucleus"


def parse_methods(text: str) -> tuple[Method, ...]:
    methods = tuple(Method.parse(name.strip()) for name in text.split(",") if name.strip())
    if not methods:
        raise ValueError("no methods given")
    if len({m.name for m in methods}) != len(methods):
        raise ValueError("a method is named twice")
    return methods


def parse_samples(text: str) -> tuple[int, ...]:
    try:
        samples = tuple(sorted({int(n) for n in text.split(",") if n.strip()}))
    except ValueError:
        raise ValueError(f"--samples takes comma-separated counts, e.g. 1,3,10 (got {text!r})") from None
    if not samples or samples[0] < 1:
        raise ValueError("sample counts must be >= 1")
    return samples


@dataclass(frozen=True)
class EvalConfig:
    model_dir: Path
    corpus_dir: Path
    journal_path: Path
    split: str = "test"
    limit: int | None = None  # the first N labelled functions of the split, in id (content hash) order
    samples: tuple[int, ...] = DEFAULT_SAMPLES
    methods: tuple[Method, ...] = field(default_factory=lambda: parse_methods(DEFAULT_METHODS))
    backend: str = "torch"
    device: str = "cpu"  # the torch backend's device (cuda on the lent GPU); results do not depend on it
    objective: str = Objective.INSTRUCTION_COUNT.value
    workers: int = 2  # compiler processes
    candidate_timeout_s: float = 20.0
    deadline_s: float | None = None  # generation budget per function and method
    time_limit_s: float | None = None  # stop starting functions after this long (resume later)
    seed: int = 0
    top_k: int = 5  # priority sampling K
    top_p: float = 1.0  # nucleus sampling
    parallel: int = 1  # priority sampling: queue heads per batch (1 = Algorithm 1)
    coreset_path: Path | None = None  # method coreset: the pass-list coreset the service serves

    @property
    def max_samples(self) -> int:
        return max(self.samples)


def coreset_of(config: EvalConfig):
    """The coreset (loaded once per path), as `strategy coreset` serves it: its first n lists, in order."""
    from optserve.engine.coreset import Coreset

    if config.coreset_path is None:
        raise ValueError("method coreset needs a coreset file")
    if config.coreset_path not in _CORESETS:
        _CORESETS[config.coreset_path] = Coreset.load(config.coreset_path)
    return _CORESETS[config.coreset_path]


_CORESETS: dict[Path, Any] = {}
