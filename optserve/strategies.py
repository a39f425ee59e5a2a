"""The names of Optimize's strategies: the proto's `Strategy` enum in lower case, one list for the service,
the engine (which implements the model's three) and the thin clients (optcc checks OPTCC_STRATEGY against it).

Standard library only: optcc imports it on every command it takes over, the client install has no pydantic.
"""

from __future__ import annotations

from enum import StrEnum


class ServedStrategy(StrEnum):
    GREEDY = "greedy"
    PRIORITY = "priority"  # priority sampling, thesis Algorithm 1
    NUCLEUS = "nucleus"  # temperature / top-p sampling
    CORESET = "coreset"  # the coreset's first lists, no model
    RANKED_CORESET = "ranked_coreset"  # priority sampling over the coreset's lists only
    STORED = "stored"  # the tuning store's lists only (no model): a build's fast path
