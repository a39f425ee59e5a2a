"""Constants the client tests share (a module of its own: test files cannot import conftest reliably)."""

from __future__ import annotations

from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "data" / "clients" / "wordstat"
HTTP_PORT = 28100
GRPC_PORT = 29100
