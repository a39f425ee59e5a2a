"""What a LoopTune search or policy answers: its chosen state, the actions to it, and what was measured.

Its own module so that the searches (search.py) and the tile methods (tiles.py), which search.py dispatches
to, both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from optserve.policies.env import AgentState


@dataclass
class SearchOutcome:
    state: AgentState
    actions: tuple[str, ...]
    gflops: float | None  # None for a method that chose without measuring (a policy)
    timed_out: bool = False
