"""All of optserve's settings in one place: defaults here, overridden by a YAML file (`--config`).

Each section belongs to one part of the system; a part reads only its own section. Settings are pydantic
models so a bad config file fails at start-up with a message naming the field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

REPO_ROOT = Path(__file__).resolve().parent.parent


def _bundled_models() -> Path:
    """models/ of the source tree, or optserve/models/ where a wheel installed them (package data)."""
    installed = Path(__file__).resolve().parent / "models"
    return installed if installed.is_dir() else REPO_ROOT / "models"


# The default model files; engine.model_dir, engine.coreset_path and looptune.policy_path point elsewhere.
BUNDLED_MODELS = _bundled_models()


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _default_compiler_workers() -> int:
    """One compiler process per CPU that the other deployments leave (serve/app.py: 0.25 + 0.5 + 0.25)."""
    return max(1, (os.cpu_count() or 1) - 1)


class CompilerSettings(_Section):
    """The compiler core: input limits and the crash-isolated worker pool."""

    max_ir_bytes: int = Field(4 * 1024 * 1024, gt=0, description="largest IR (text or bitcode) accepted")
    max_pass_list_length: int = Field(64, gt=0, description="most passes in one candidate list")
    candidate_timeout_s: float = Field(20.0, gt=0, description="wall time for compiling one candidate")
    workers: int = Field(
        default_factory=_default_compiler_workers,
        gt=0,
        description="worker processes of one CompilerWorkers replica, which reserves one Ray CPU for each "
        "(default: this machine's CPUs less the one the ingress, engine and LoopTune reserve together)",
    )
    standby_workers: int = Field(
        1,
        ge=0,
        description="worker processes started and idle beside `workers`, each taking the place of a worker "
        "stopped at a deadline or lost at once (not reserved as a Ray CPU: idle until then)",
    )
    cache_entries: int = Field(100_000, ge=0, description="content-addressed result cache size")
    worker_memory_mb: int | None = Field(
        4096, gt=0, description="address-space limit per worker (None: none)"
    )


class EngineSettings(_Section):
    """The pass-ordering model and how candidates are drawn from it."""

    model_dir: Path = Field(BUNDLED_MODELS / "passformer", description="HF model directory with profile.json")
    backend: str = Field(
        "vllm",
        pattern="^(vllm|torch)$",
        description="vllm (faster greedy, batches concurrent clients) or torch (starts 2-4x faster, faster "
        "priority sampling for one client; where vLLM cannot run); docs/bench/serve.md",
    )
    max_samples: int = Field(100, gt=0)
    max_feedback_rounds: int = Field(3, ge=0)
    coreset_path: Path = Field(
        BUNDLED_MODELS / "coreset" / "coreset.json", description="pass-list coreset (strategy `coreset`)"
    )
    coreset_fallback_lists: int = Field(
        10, ge=0, description="coreset lists tried for an input longer than the model's context"
    )
    coreset_lists_with_model: int = Field(
        1,
        ge=0,
        description="the coreset's first lists compiled beside the model's candidates of every model "
        "strategy (one more compile: on real test functions the first list alone saves most of what search "
        "finds; docs/bench/passlm_v2.md); 0: model candidates only",
    )
    unit_function_prompts: int = Field(
        4,
        ge=0,
        description="for an input longer than the model's context: how many of its largest functions the "
        "model reads (each list it proposes is compiled for the whole input); 0: none",
    )
    unit_function_lists: int = Field(
        10,
        ge=0,
        description="model strategies, an input of several functions: one more candidate that gives each "
        "function the best of -Oz and the coreset's first lists, measured on that function alone, linked "
        "back into the unit (compiler/unit_search.py; docs/bench/function_lists.md); 0: off",
    )
    unit_function_lists_max_functions: int = Field(
        200,
        ge=2,
        description="no per-function candidate for an input that defines more functions than this: its "
        "compiles grow with the function count (unit_function_lists + 1 per function), so a unit of "
        "hundreds of functions spends its whole deadline there (19 of the 4,447 real corpus units define "
        "more than 200; 99% at most 146)",
    )
    unit_function_refine: bool = Field(
        False,
        description="with unit_function_lists: one round of local search per function after the coreset "
        "lists (its best list with one more pass appended, 10 compiles per function; "
        "docs/bench/unit_lists.md)",
    )


class LoopTuneSettings(_Section):
    """The LoopTune policy and the loop-nest kernel backend."""

    policy_path: Path = Field(BUNDLED_MODELS / "looptune" / "policy.pt")
    decision_policy_path: Path | None = Field(
        None,
        description="the network of the quick decision (policy_tiles); None: policy_path. The tile Q-network"
        " models/looptune/tile_policy.pt is bundled but not the default (docs/bench/looptune.md)",
    )
    max_loops: int = Field(10, gt=0)
    max_dim: int = Field(4096, gt=0, description="largest size of one index")
    max_tensor_bytes: int = Field(64 * 1024 * 1024, gt=0)
    max_flops: int = Field(
        2 * 512**3, gt=0, description="largest contraction measured (2 * product of sizes)"
    )
    max_kernel_statements: int = Field(
        256, gt=0, description="most unrolled multiply-adds in one register tile (bounds code size)"
    )
    search_time_limit_s: float = Field(60.0, gt=0, description="longest schedule search accepted")
    timing_repeats: int = Field(10, gt=0, description="best-of-N timing runs per schedule")
    timing_warmup_calls: int = Field(20, ge=0, description="untimed calls before timing (thesis: 20)")
    polish_time_s: float = Field(
        0.5,
        gt=0,
        description="measuring budget of the quick decision (policy_tiles), the base timed last in it",
    )
    budget_clock: Literal["wall", "cpu"] = Field(
        "wall",
        description="what a search's time budget counts: wall time, or the deciding thread's CPU time (the"
        " same candidates measured whatever the machine's load; longer wall time under load)",
    )
    polish_timing_repeats: int = Field(3, gt=0, description="best-of-N timing runs in the quick decision")
    polish_warmup_calls: int = Field(2, ge=0, description="untimed calls before timing in the quick decision")


class ServeSettings(_Section):
    """Where the service listens and who may call it."""

    host: str = Field("127.0.0.1", description="loopback only unless set otherwise")
    http_port: int = Field(8000, gt=0, lt=65536)
    grpc_port: int = Field(9000, gt=0, lt=65536)
    auth_token: str | None = Field(None, description="if set, callers must present it")
    tls_certfile: Path | None = Field(
        None, description="PEM certificate: HTTP is served as HTTPS, gRPC with TLS on grpc_tls_port"
    )
    tls_keyfile: Path | None = Field(None, description="PEM private key of tls_certfile")
    grpc_tls_port: int = Field(
        9443, gt=0, lt=65536, description="gRPC over TLS (with tls_*); grpc_port then serves loopback only"
    )
    max_queued_requests: int = Field(64, gt=0, description="per deployment; then RESOURCE_EXHAUSTED/429")
    max_ongoing_requests: int = Field(8, gt=0, description="concurrent requests one ingress replica runs")
    ray_address: str | None = Field(None, description="join this Ray cluster; None starts a local one")
    ray_num_cpus: int | None = Field(None, gt=0, description="CPUs of the local Ray instance")
    proxy_ready_timeout_s: float = Field(
        60.0,
        gt=0,
        description="how long Serve's controller waits for a starting proxy before it kills and restarts it "
        "(RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S; Ray's 5 s is too short on two saturated cores)",
    )
    default_deadline_s: float = Field(30.0, gt=0, description="Optimize budget when the request gives none")
    max_deadline_s: float = Field(300.0, gt=0)
    result_cache_entries: int = Field(10_000, ge=0, description="Optimize answers kept per ingress replica")
    ingress_replicas: int = Field(1, gt=0)
    compiler_replicas: int = Field(1, gt=0, description="min replicas; autoscaling adds up to 4x")
    engine_replicas: int = Field(1, gt=0)
    looptune_replicas: int = Field(1, gt=0)
    engine_num_gpus: float = Field(-1, ge=-1, description="GPUs per engine replica; -1 = 1 if Ray sees a GPU")
    max_replicas_per_node: int | None = Field(None, gt=0, description="spread engine/compiler replicas")


class CorpusSettings(_Section):
    """The IR corpus builders and the autotuned labelling of issue 6 (docs/bench/corpus.md)."""

    data_dir: Path = Field(REPO_ROOT / "data", description="downloads, extracted sources, corpus and labels")
    min_instructions: int = Field(4, gt=0, description="drop functions with fewer instructions (trivial)")
    max_function_bytes: int = Field(
        8192, gt=0, description="drop functions whose normalized IR is longer (model context, ~2 chars/token)"
    )
    val_percent: int = Field(5, ge=0, le=50, description="share of source files held out for validation")
    test_percent: int = Field(5, ge=0, le=50, description="share of source files held out for test")
    compile_timeout_s: float = Field(60.0, gt=0, description="clang-19 wall time per source file")
    csmith_programs: int = Field(2000, ge=0, description="csmith programs generated (seeds 1..N)")
    shard_size: int = Field(1000, gt=0, description="examples per corpus JSONL shard")
    label_budget: int = Field(1000, ge=1, description="autotuner compilations per function and objective")


class Settings(_Section):
    compiler: CompilerSettings = CompilerSettings()
    engine: EngineSettings = EngineSettings()
    looptune: LoopTuneSettings = LoopTuneSettings()
    serve: ServeSettings = ServeSettings()
    corpus: CorpusSettings = CorpusSettings()


def load_settings(path: str | Path | None = None) -> Settings:
    """Defaults, overridden by the YAML file at `path` (or $OPTSERVE_CONFIG) when given."""
    path = path or os.environ.get("OPTSERVE_CONFIG")
    if not path:
        return Settings()
    import yaml  # only here: the client commands that read defaults need no YAML parser

    data = yaml.safe_load(Path(path).read_text()) or {}
    return Settings.model_validate(data)
