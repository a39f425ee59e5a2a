"""The coreset: a fixed, ordered set of pass lists chosen from training labels (corpus/coreset.py).

A candidate source next to the model: the service's `coreset` strategy serves its first `samples` lists
(deterministic, no model call), and units the model cannot read (longer than its context) get its first
lists instead of -Oz alone. It is also the baseline a model must beat at an equal compile budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from optserve.compiler.passes import validate_pass_list


@dataclass(frozen=True)
class Coreset:
    version: str = "none"
    lists: dict[str, tuple[tuple[str, ...], ...]] = field(
        default_factory=dict
    )  # objective -> lists, in order

    @classmethod
    def load(cls, path: Path) -> Coreset:
        """The coreset file; a missing file is an empty coreset (then only the model and -Oz are served)."""
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        lists = {
            objective: tuple(validate_pass_list(item["passes"]) for item in items)
            for objective, items in data["objectives"].items()
        }
        return cls(version=str(data["version"]), lists=lists)

    def first(self, objective: str, count: int) -> tuple[tuple[str, ...], ...]:
        return self.lists.get(objective, ())[:count]
