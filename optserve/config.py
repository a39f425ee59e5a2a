"""All of optserve's settings in one place: defaults here, overridden by a YAML file (`--config`).

Each section belongs to one part of the system; a part reads only its own section. Settings are pydantic
models so a bad config file fails at start-up with a message naming the field.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

REPO_ROOT = Path(__file__).resolve().parent.parent
BUNDLED_MODELS = REPO_ROOT / "models"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CompilerSettings(_Section):
    """The compiler core: input limits and the crash-isolated worker pool."""

    max_ir_bytes: int = Field(4 * 1024 * 1024, gt=0, description="largest IR (text or bitcode) accepted")
    max_pass_list_length: int = Field(64, gt=0, description="most passes in one candidate list")
    candidate_timeout_s: float = Field(20.0, gt=0, description="wall time for compiling one candidate")
    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, gt=0, description="worker processes")
    cache_entries: int = Field(100_000, ge=0, description="content-addressed result cache size")


class EngineSettings(_Section):
    """The pass-ordering model and how candidates are drawn from it."""

    model_dir: Path = Field(BUNDLED_MODELS / "passformer", description="HF model directory with profile.json")
    backend: str = Field("vllm", pattern="^(vllm|torch)$", description="vllm, or torch where vLLM cannot run")
    max_samples: int = Field(100, gt=0)
    max_feedback_rounds: int = Field(3, ge=0)


class LoopTuneSettings(_Section):
    """The LoopTune policy and the loop-nest kernel backend."""

    policy_path: Path = Field(BUNDLED_MODELS / "looptune" / "policy.pt")
    max_loops: int = Field(10, gt=0)
    max_dim: int = Field(4096, gt=0, description="largest size of one index")
    max_tensor_bytes: int = Field(64 * 1024 * 1024, gt=0)


class ServeSettings(_Section):
    """Where the service listens and who may call it."""

    host: str = Field("127.0.0.1", description="loopback only unless set otherwise")
    http_port: int = Field(8000, gt=0, lt=65536)
    grpc_port: int = Field(9000, gt=0, lt=65536)
    auth_token: str | None = Field(None, description="if set, callers must present it")
    max_queued_requests: int = Field(64, gt=0)


class Settings(_Section):
    compiler: CompilerSettings = CompilerSettings()
    engine: EngineSettings = EngineSettings()
    looptune: LoopTuneSettings = LoopTuneSettings()
    serve: ServeSettings = ServeSettings()


def load_settings(path: str | Path | None = None) -> Settings:
    """Defaults, overridden by the YAML file at `path` (or $OPTSERVE_CONFIG) when given."""
    path = path or os.environ.get("OPTSERVE_CONFIG")
    if not path:
        return Settings()
    data = yaml.safe_load(Path(path).read_text()) or {}
    return Settings.model_validate(data)
