"""Hosts one pass-ordering model for the service: loads it, names its version, says why it is not ready.

A missing or broken model does not stop the service (LoopTune and health still answer): the host records
the reason, reports it in the model metadata and readiness, and Optimize answers UNAVAILABLE with it.
An engine that dies later (its vLLM process killed, e.g. by the OOM killer) is the same, and more: the
host's `check_health` fails, so Ray Serve replaces the replica, and the new one loads the model afresh.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from optserve.config import CompilerSettings, EngineSettings
from optserve.engine.backend import DecoderDeadError
from optserve.engine.interface import Generation, SamplingOptions
from optserve.serve import schemas
from optserve.serve.errors import unavailable

if TYPE_CHECKING:
    from optserve.engine.engine import ModelEngine

log = logging.getLogger(__name__)

STRATEGIES = [strategy.value for strategy in schemas.ServedStrategy]


def model_version(model_dir: Path) -> str:
    """Content hash of every file in the model directory: a changed weight or tokenizer changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(model_dir)).encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _platform() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class EngineHost:
    def __init__(self, settings: EngineSettings, compiler: CompilerSettings):
        self.settings = settings
        self.compiler = compiler
        self.engine: ModelEngine | None = None
        self.version = ""
        self.reason = ""
        self.dead = False  # the loaded engine died: only a new replica (a new host) recovers
        model_dir = Path(settings.model_dir)
        if not (model_dir / "profile.json").is_file():
            what = "does not exist" if not model_dir.exists() else "has no profile.json"
            self.reason = (
                f"model directory {model_dir} {what}; set engine.model_dir in the config file to a trained "
                "model (or build a stand-in with `python -m optserve.passlm.tiny_model DIR`)"
            )
            log.warning("pass-ordering model not loaded: %s", self.reason)
            return
        try:
            from optserve.engine.engine import ModelEngine

            self.version = model_version(model_dir)
            options = {"device": _platform()} if settings.backend == "torch" else {}
            self.engine = ModelEngine.load(model_dir, settings.backend, **options)
        except Exception as err:  # the service keeps answering; the reason is reported to callers
            self.reason = f"loading {model_dir} with the {settings.backend} backend failed: {err}"
            log.exception("pass-ordering model not loaded")

    @property
    def model_id(self) -> str:
        return self.engine.model_id if self.engine is not None else Path(self.settings.model_dir).name

    def metadata(self) -> schemas.ModelMetadata:
        return schemas.ModelMetadata(
            name=self.model_id,
            version=self.version,
            backend=self.settings.backend,
            platform=_platform(),
            ready=self.engine is not None and not self.dead,
            reason=self.reason,
            strategies=STRATEGIES,
            max_samples=self.settings.max_samples,
            max_feedback_rounds=self.settings.max_feedback_rounds,
            max_ir_bytes=self.compiler.max_ir_bytes,
        )

    async def generate(self, ir: str, options: SamplingOptions, feedback: str | None = None) -> Generation:
        """The engine's candidates; PromptTooLongError for a module longer than the model's context."""
        if self.engine is None or self.dead:
            raise unavailable(f"pass-ordering model {self.model_id!r} is not ready: {self.reason}")
        try:
            return await self.engine.generate(ir, options, feedback)
        except DecoderDeadError as err:
            self._died(err)
            raise unavailable(f"pass-ordering model {self.model_id!r} is not ready: {self.reason}") from None

    async def check_health(self) -> None:
        """Raise once the loaded engine has died (Ray Serve then replaces this replica).

        A model that never loaded is not a failure of this replica: a new one would fail the same way, so it
        stays up and says why (metadata, readiness).
        """
        if self.engine is None:
            return
        if not self.dead:
            try:
                await self.engine.check_health()
            except DecoderDeadError as err:
                self._died(err)
        if self.dead:
            raise RuntimeError(self.reason)

    def _died(self, err: DecoderDeadError) -> None:
        if not self.dead:
            self.dead = True
            self.reason = f"{err}; the {self.settings.backend} engine is being restarted, retry shortly"
            log.error("pass-ordering engine died: %s", err)

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.close()
