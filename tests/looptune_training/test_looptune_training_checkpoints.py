"""LoopTune training's checkpoints load no code: torch.load(weights_only=True) refuses a crafted file."""

from __future__ import annotations

import pytest


class _RunsCode:
    """Pickles as a call (Path.touch of `marker`): what a crafted checkpoint makes torch.load run."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (self.marker,))


def test_resume_loads_no_code_from_a_checkpoint(tmp_path):
    """A DQN checkpoint is read with torch.load(weights_only=True): one that would run code is refused."""
    import pickle
    from pathlib import Path

    import torch

    from optserve.looptune_training.train import TrainConfig, load_measured, train_cost_model, train_dqn

    data = load_measured(Path("tests/data/policies/measured_small.json.gz"))
    cfg = TrainConfig(cost_epochs=1, envs=4, iterations=1, pretrain_updates=1, eval_shapes=4, batch=32)
    cost_model, _ = train_cost_model(data, cfg, tmp_path)
    marker = tmp_path / "code-ran"
    torch.save({"q": {}, "payload": _RunsCode(marker)}, tmp_path / "checkpoint.pt")
    with pytest.raises(pickle.UnpicklingError):
        train_dqn(data, cost_model, cfg, tmp_path, resume=True)
    assert not marker.exists()
