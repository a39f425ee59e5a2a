"""What the Optimize flow tests share: a scripted generator in place of the model, the settings with model
candidates alone, and one call of the Ray-free Optimizer over the real compiler pool."""

from __future__ import annotations

import asyncio
import json

from optserve.compiler.cache import ResultCache
from optserve.config import Settings
from optserve.engine.interface import Candidate, Generation, SamplingOptions
from optserve.serve import schemas
from optserve.serve.optimize.optimizer import Optimizer

# Model candidates alone (the coreset's lists beside them have their own test).
SETTINGS = Settings.model_validate(
    {"engine": {"max_samples": 10, "max_feedback_rounds": 2, "coreset_lists_with_model": 0}}
)


class ScriptedGenerator:
    """Returns the given pass lists (after `delay_s`), as a model with `version` would.

    `pass_lists` is one list of pass lists for every call, or (`per_round=True`) one such list per call.
    """

    def __init__(
        self, pass_lists, delay_s=0.0, version="v1", ready=True, error=None, per_round=False
    ):  # fmt: skip
        self.rounds = pass_lists if per_round else [pass_lists]
        self.delay_s = delay_s
        self.version = version
        self.ready = ready
        self.error = error
        self.calls: list[SamplingOptions] = []
        self.feedback: list[str | None] = []

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None) -> Generation:
        self.calls.append(options)
        self.feedback.append(feedback)
        if self.error is not None:
            raise self.error
        await asyncio.sleep(self.delay_s)
        pass_lists = self.rounds[min(len(self.calls), len(self.rounds)) - 1]
        candidates = tuple(Candidate(tuple(p), -float(i)) for i, p in enumerate(pass_lists))
        return Generation(candidates, "scripted", tokens_computed=0)

    async def metadata(self) -> schemas.ModelMetadata:
        return schemas.ModelMetadata(
            name="scripted",
            version=self.version,
            backend="torch",
            platform="cpu",
            ready=self.ready,
            reason="" if self.ready else "weights missing",
            strategies=["greedy", "priority", "nucleus"],
            max_samples=10,
            max_feedback_rounds=2,
            max_ir_bytes=1 << 20,
        )


def optimize(
    generator, pool, request: schemas.OptimizeRequest, cache: ResultCache | None = None, settings=None
):
    cache = cache if cache is not None else ResultCache(10)
    optimizer = Optimizer(settings or SETTINGS, generator, pool, cache, generator.metadata)
    return asyncio.run(optimizer.optimize(request))


def with_coreset(tmp_path, lists, objective="instruction_count", fallback=10, beside=0) -> Settings:
    path = tmp_path / "coreset.json"
    items = [{"passes": list(p), "gain": 0.0, "wins": 0} for p in lists]
    path.write_text(json.dumps({"version": "test", "objectives": {objective: items}}))
    engine = {"max_samples": 10, "max_feedback_rounds": 2, "coreset_path": str(path)}
    engine |= {"coreset_fallback_lists": fallback, "coreset_lists_with_model": beside}
    return Settings.model_validate({"engine": engine})
