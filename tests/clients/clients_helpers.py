"""Constants the client tests share (a module of its own: test files cannot import conftest reliably)."""

from __future__ import annotations

import os
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "clients" / "wordstat"
# The serve tests' ports (OPTSERVE_TEST_HTTP_PORT / OPTSERVE_TEST_GRPC_PORT) + 10100: a worktree's own ports
# keep its client tests from reaching another run's service (28100/29100 by default).
HTTP_PORT = int(os.environ.get("OPTSERVE_TEST_HTTP_PORT", "18000")) + 10100
GRPC_PORT = int(os.environ.get("OPTSERVE_TEST_GRPC_PORT", "19000")) + 10100
