"""Training and evaluating LoopTune policies: n-step returns, DQN checkpoints and resume, the evaluation's
interleaved timing and report, and the tile Q-network learnt from measured returns (looptune_training/:
train, evaluate, tile_q)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optserve.looptune_training.suites import HELD_OUT, wide_training_suite
from optserve.looptune_training.train import n_step_transitions


def test_n_step_returns_discount_and_stop_at_the_episode_end():
    obs = np.arange(4, dtype=np.float32)[:, None, None] * np.ones((4, 1, 200), np.float32)
    masks = np.ones((4, 1, 7), bool)
    actions = np.array([[1], [2], [3]])
    rewards = np.array([[1.0], [2.0], [4.0]], np.float32)
    o, a, ret, nxt, _, disc = n_step_transitions(obs, actions, rewards, masks, gamma=0.5, n=2)
    assert a.tolist() == [1, 2, 3]
    assert ret.tolist() == [1 + 0.5 * 2, 2 + 0.5 * 4, 4]
    assert nxt[:, 0].tolist() == [2, 3, 3] and disc.tolist() == [0.25, 0.0, 0.0]


def test_evaluation_items_time_what_they_compare_together_and_render_a_report():
    from optserve.looptune_training.evaluate import report, run_item

    policy_row = run_item({"shape": "mm64_64_64", "method": "policy", "rounds": 2})
    assert len(policy_row["actions"]) == 10 and policy_row["inference_ms"] > 0
    assert policy_row["polish_gflops"] >= max(policy_row["gflops"], policy_row["base_gflops"]) > 0
    assert policy_row["numpy_gflops"] > 0
    search = ["split_4", "down", "swap_down"]
    search_row = {"shape": "mm64_64_64", "method": "beam4dfs", "gflops": 1.0, "actions": search}
    compare_row = run_item(
        {"shape": "mm64_64_64", "method": "compare", "searches": {"beam4dfs": search}, "rounds": 2}
    )
    timed = compare_row["gflops"]
    assert set(timed) == {"base", "numpy", "policy", "polish", "beam4dfs"}
    assert timed["polish"] >= timed["policy"] > 0 and timed["beam4dfs"] > 0
    data = {
        "meta": {
            "date": "now",
            "cpu": "cpu",
            "host_target": "target",
            "workers": 1,
            "peak_gflops": 1.0,
            "config": {"split": "test", "search_time_s": 1.0, "rounds": 2},
            "search_sample": ["mm64_64_64"],
        },
        "results": [policy_row, search_row, compare_row],
    }
    text = report(data, "optserve eval looptune")
    assert "| policy + polish | 1 |" in text and "Acceptance" in text
    # the search's row shows its re-timed GFLOPS, and the geomean it measured for itself (1.0) beside it
    assert f"| beam4dfs | 1 | {timed['beam4dfs']:.1f} |" in text and "| 1.0 |" in text


@pytest.mark.slow  # ~10-30 s: fits a cost model and runs a few DQN iterations twice
def test_training_checkpoints_and_resumes_where_it_stopped(tmp_path):
    from dataclasses import replace
    from pathlib import Path

    from optserve.looptune_training.train import TrainConfig, load_measured, train_cost_model, train_dqn

    data = load_measured(Path("tests/data/policies/measured_small.json.gz"))
    cfg = TrainConfig(
        cost_epochs=1, envs=4, iterations=2, pretrain_updates=5, eval_every=1, eval_shapes=4, batch=32
    )
    cost_model, meta = train_cost_model(data, cfg, tmp_path)
    assert meta["samples"] == sum(len(s["nests"]) for s in data["shapes"])
    train_dqn(data, cost_model, cfg, tmp_path, resume=False)
    assert (tmp_path / "checkpoint.pt").is_file() and (tmp_path / "pretrained_policy" / "policy.pt").is_file()
    _, meta = train_dqn(data, cost_model, replace(cfg, iterations=3), tmp_path, resume=True)
    rows = (tmp_path / "learning_curve.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["0", "1", "2", "3"]
    assert meta["episodes"] == 3 * cfg.envs


def synthetic_data(suite) -> dict:
    """Measured data where the best action depends on the kind: tile 0 wins on matvec, tile 1 elsewhere."""
    actions = ["tile:4x2rv", "tile:1x4rv-k256", "tile:12x1rv"]
    shapes = [
        {
            "shape": c.name,
            "kind": c.kind,
            "gflops": [20.0, 5.0, 0.0] if c.kind == "matvec" else [5.0, 20.0, 10.0],
        }
        for c in suite
    ]
    meta = {"measured_on": "test", "machine": "test", "date": "-", "command": "-", "rounds": 1}
    return {"meta": meta, "actions": actions, "shapes": shapes}


def test_tile_q_learns_the_measured_best_action_per_kind(tmp_path):
    from optserve.looptune_training.tile_q import load, picks, rows, train

    path = tmp_path / "data.json"
    path.write_text(json.dumps(synthetic_data(wide_training_suite(2))))
    data = load(path)
    batch = rows(data)
    assert np.isnan(batch.target[[r["kind"] == "matvec" for r in data["shapes"]], 2]).all()  # refused
    q = train(batch, data["actions"], [32], epochs=60, lr=3e-3, seed=0)
    chosen = picks(q, batch, np.ones(3, dtype=bool))
    assert chosen.tolist() == [0 if r["kind"] == "matvec" else 1 for r in data["shapes"]]


def test_tile_q_refuses_data_with_a_held_out_shape(tmp_path):
    from optserve.looptune_training.tile_q import load

    data = synthetic_data([HELD_OUT[0]])
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="held-out"):
        load(path)
