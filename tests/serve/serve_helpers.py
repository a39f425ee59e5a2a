"""Constants and builders shared by the serve tests (the fixtures live in conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from optserve.config import Settings

DATA = Path(__file__).resolve().parent.parent / "data" / "serve"
TOKEN = "test-token-7f3a"
HTTP_PORT = 18000
GRPC_PORT = 19000
# Small limits, so overload and size errors are cheap to provoke.
MAX_IR_BYTES = 1536 * 1024
MAX_QUEUED = 4
MAX_ONGOING = 6


def build_tiny_model(directory: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "optserve.engine.tiny_model", str(directory)], check=True, capture_output=True
    )
    return directory


def service_settings(model_dir: Path, **serve_fields) -> Settings:
    return Settings.model_validate(
        {
            "compiler": {"workers": 2, "max_ir_bytes": MAX_IR_BYTES},
            "engine": {"model_dir": str(model_dir), "backend": "torch", "max_samples": 20},
            "serve": {
                "http_port": HTTP_PORT,
                "grpc_port": GRPC_PORT,
                "auth_token": TOKEN,
                "ray_num_cpus": 4,
                "max_queued_requests": MAX_QUEUED,
                "max_ongoing_requests": MAX_ONGOING,
                "default_deadline_s": 60.0,
            }
            | serve_fields,
        }
    )


def slow_module() -> str:
    """A valid module just under the size limit that -Oz needs about two seconds for."""
    import random

    from optserve.engine.tiny_model import synthetic_function

    rng = random.Random(0)
    module = "\n".join(synthetic_function(rng, f"f{i}") for i in range(1200))
    assert len(module) < MAX_IR_BYTES
    return module
