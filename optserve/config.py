"""All of optserve's settings in one place: defaults here, overridden by a YAML file, overridden by the
environment.

Each section belongs to one part of the system; a part reads only its own section. Settings are pydantic
models (pydantic-settings for the environment) so a bad value fails at start-up with a message naming the
field and where it came from. The order, later ones winning:

1. the defaults below;
2. the YAML file given as `--config FILE` or `$OPTSERVE_CONFIG` (sections and fields as named here);
3. environment variables `OPTSERVE_<SECTION>__<FIELD>` (e.g. `OPTSERVE_SERVE__HTTP_PORT=8080`,
   `OPTSERVE_COMPILER__WORKERS=4`; `null` sets a field to None).

`optserve config show` prints the effective settings and where each came from (docs/config.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

ENV_PREFIX = "OPTSERVE_"
ENV_NESTED_DELIMITER = "__"
CONFIG_FILE_ENV = "OPTSERVE_CONFIG"  # the YAML file, when no `--config` is given
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
    burst_workers: int = Field(
        1,
        ge=0,
        description="extra compiling processes of one CompilerWorkers replica, used only while all `workers` "
        "are busy, so that a job arriving during a compile (a build's two units under make -j2) runs beside "
        "it instead of waiting (not reserved as a Ray CPU: idle otherwise; started on the first such job, "
        "not with the replica; not a standby; 0: jobs wait for a worker)",
    )
    intake_workers: int = Field(
        1,
        gt=0,
        description="worker processes of one CompilerWorkers replica that read requests' IR (parse, verify, "
        "split, the tuning store's keys), apart from the compiling ones so that reading a request never "
        "waits behind compiles (not reserved as a Ray CPU: each read takes milliseconds)",
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
        "finds; docs/bench/passlm_experiments.md, v2); 0: model candidates only",
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
    timed_flops: int = Field(
        2 * 512**3,
        gt=0,
        description="floating-point operations (2 * product of sizes) a thread of the request times whole:"
        " a contraction above this many per thread is decided on a sub-problem of this many per thread, its"
        " candidates run on the request's threads (policies/proxy.py), so no size is refused",
    )
    max_kernel_statements: int = Field(
        256, gt=0, description="most unrolled multiply-adds in one register tile (bounds code size)"
    )
    threads: int | None = Field(
        None,
        gt=0,
        description="threads a kernel may run on when the request names none (kernels/parallel.py: a grid of"
        " cells over one or two output indices, run by an OpenMP team); None: the CPUs the deciding process"
        " may run on",
    )
    max_threads: int = Field(256, gt=0, description="most threads a request may ask a kernel to run on")
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
    auth_token: SecretStr | None = Field(
        None,
        description="if set, callers must present it (a secret: never logged, printed or sent in metadata)",
    )
    require_token_beyond_loopback: bool = Field(
        False,
        description="`optserve serve` refuses a non-loopback host without auth_token (else it warns); the "
        "image sets it (OPTSERVE_SERVE__REQUIRE_TOKEN_BEYOND_LOOPBACK=true), false there is the opt-out",
    )
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
    ingress_replicas: int = Field(
        2,
        gt=0,
        description="a killed one is no outage: the proxy routes to the other while Serve replaces it (each "
        "~210 MB RSS, ~1 % of a core idle; docs/bench/reliability.md); 1 saves that memory",
    )
    compiler_replicas: int = Field(1, gt=0, description="min replicas; autoscaling adds up to 4x")
    engine_replicas: int = Field(1, gt=0)
    looptune_replicas: int = Field(1, gt=0)
    engine_num_gpus: float = Field(-1, ge=-1, description="GPUs per engine replica; -1 = 1 if Ray sees a GPU")
    max_replicas_per_node: int | None = Field(None, gt=0, description="spread engine/compiler replicas")


class CorpusSettings(_Section):
    """The IR corpus builders and its autotuned labelling (docs/bench/corpus.md)."""

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


class TuningSettings(_Section):
    """The tuning store: the best pass lists found so far per function and per unit (tuning/), read by the
    service's fast path and written by `optserve tune`."""

    store_url: str = Field(
        "",
        description="sqlite:///PATH, a file path, or postgresql://... for a store shared by a build farm; "
        "empty: the user's cache directory (tuning/store.py: default_store_path)",
    )
    record_units: bool = Field(True, description="keep every unit the service is sent, for `optserve tune`")
    max_recorded_mb: int = Field(2048, gt=0, description="bound on the recorded units' compressed bytes")
    profile: Path | None = Field(
        None, description="a tuning profile file: serve only its lists (read-only), for reproducible builds"
    )
    default_budget: int = Field(300, gt=0, description="`optserve tune`: compiles per function searched")
    min_saved_bytes: int = Field(
        32,
        ge=0,
        description="a stored answer saving fewer bytes than this against -Oz is not given (the unit gets "
        "-Oz): it would cost its compile on every build that misses the object cache",
    )
    background: bool = Field(
        False,
        description="tune recorded units at low priority while the service is idle (off on build machines)",
    )


class ObservabilitySettings(_Section):
    """OpenTelemetry traces of the service (serve/observability/tracing.py): off unless an OTLP endpoint is
    given."""

    otlp_endpoint: str | None = Field(
        None,
        description="OTLP collector to send traces to (grpc: http://HOST:4317, http/protobuf: "
        "http://HOST:4318/v1/traces); None: no traces, no OpenTelemetry SDK loaded",
    )
    otlp_protocol: Literal["grpc", "http/protobuf"] = Field("grpc", description="the OTLP transport")
    service_name: str = Field("optserve", min_length=1, description="the traces' `service.name` resource")
    trace_sample_ratio: float = Field(
        1.0, ge=0.0, le=1.0, description="share of requests traced (a caller's sampled traceparent wins)"
    )


class Settings(BaseSettings):
    """Every section. `Settings()` is the defaults overridden by the environment; `load_settings` puts a
    YAML file between them. Values passed in (`Settings.model_validate(d)`, as the service's replicas do
    with the driver's settings) win over the environment."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        env_parse_none_str="null",
        extra="forbid",
        frozen=True,
    )

    compiler: CompilerSettings = CompilerSettings()
    engine: EngineSettings = EngineSettings()
    looptune: LoopTuneSettings = LoopTuneSettings()
    serve: ServeSettings = ServeSettings()
    corpus: CorpusSettings = CorpusSettings()
    tuning: TuningSettings = TuningSettings()
    observability: ObservabilitySettings = ObservabilitySettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Values passed in, then the environment: no `.env` file or secrets folder is read."""
        return init_settings, env_settings


class SettingsError(ValueError):
    """Settings that do not validate; the message names each field, its problem and its source."""


Source = Literal["default", "file", "env"]


@dataclass(frozen=True)
class LoadedSettings:
    """The effective settings, the config file they read (if any) and where each field's value came from
    (dotted field name, e.g. `serve.http_port`, to "default", "file" or "env")."""

    settings: Settings
    config_file: Path | None
    sources: dict[str, Source]


def env_name(field: str) -> str:
    """The environment variable that sets a dotted field: `serve.http_port` -> OPTSERVE_SERVE__HTTP_PORT."""
    return ENV_PREFIX + ENV_NESTED_DELIMITER.join(field.split(".")).upper()


def load_settings(path: str | Path | None = None) -> Settings:
    """Defaults, overridden by the YAML file at `path` (or $OPTSERVE_CONFIG) when given, overridden by
    OPTSERVE_* environment variables. SettingsError names every bad field and its source."""
    return load_settings_with_sources(path).settings


def load_settings_with_sources(path: str | Path | None = None) -> LoadedSettings:
    """`load_settings`, and where each field's value came from."""
    path = path or os.environ.get(CONFIG_FILE_ENV) or None
    config_file = Path(path) if path else None
    file_values = _read_config_file(config_file) if config_file else {}
    env_values = EnvSettingsSource(Settings)()
    from_file, from_env = set(_leaves(file_values)), set(_leaves(env_values))
    try:
        # The environment is merged over the file here; validating the merged values again applies the
        # environment once more, which changes nothing.
        settings = Settings.model_validate(_merged(file_values, env_values))
    except ValidationError as error:
        raise SettingsError(_describe(error, config_file, from_file, from_env)) from None
    sources: dict[str, Source] = {
        field: "env" if field in from_env else "file" if field in from_file else "default"
        for field in settings_fields()
    }
    return LoadedSettings(settings, config_file, sources)


def settings_fields() -> list[str]:
    """Every field as `section.field`, in declaration order."""
    return [
        f"{section}.{name}"
        for section, info in Settings.model_fields.items()
        for name in info.annotation.model_fields
    ]


def replica_config(settings: Settings) -> dict[str, Any]:
    """`settings` as the plain JSON-typed dict each deployment of the service validates again (serve/app.py ->
    serve/replicas/deployments.py), with the auth token's value, which a JSON dump masks: Ray hands it to the
    replicas; it is for them only, never printed."""
    config = settings.model_dump(mode="json")
    if settings.serve.auth_token is not None:
        config["serve"]["auth_token"] = settings.serve.auth_token.get_secret_value()
    return config


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        import yaml  # only here: the client commands that read defaults need no YAML parser
    except ImportError as error:
        raise SettingsError(
            f"reading the config file {path} needs PyYAML (pip install 'optserve[serve]')"
        ) from error
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise SettingsError(f"cannot read the config file {path}: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(
            f"the config file {path} must hold a mapping of sections, not a {type(data).__name__}"
        )
    return data


def _leaves(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the leaf values of nested mappings."""
    names = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        names += _leaves(value, f"{name}.") if isinstance(value, Mapping) else [name]
    return names


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s values in its place, nested mappings merged key by key."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(
    error: ValidationError, config_file: Path | None, from_file: set[str], from_env: set[str]
) -> str:
    """Each bad field, where its value came from, and what is wrong (never the value: it may be a secret)."""
    lines = []
    for problem in error.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in problem["loc"])
        if any(field == name or name.startswith(f"{field}.") for name in from_env):
            source = f"from ${env_name(field)}"
        elif any(field == name or name.startswith(f"{field}.") for name in from_file):
            source = f"from {config_file}"
        else:
            source = "default"
        lines.append(f"  {field} ({source}): {problem['msg']}")
    return "invalid settings:\n" + "\n".join(lines)
