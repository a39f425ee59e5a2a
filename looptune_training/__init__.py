"""looptune_training: LoopTune's training wing, offline: what builds models/looptune and measures it.

- `dataset`: the 2197 matmuls (M, K, N in 64..256 step 16) and the fixed 80/20 split.
- `suites`: every contraction kind: a fixed-seed training suite and a fixed held-out suite.
- `templates`: schedule templates, candidate pools and the greedy cover (the tile cover's selection).
- `collect`, `measure_templates`: the training data: measured schedules of the training shapes (searches;
  the templates' final schedules), run as `python -m optserve.looptune_training.collect|measure_templates`.
- `tree_q`: Q-learning on the measured template tree.
- `train`: cost model + double DQN trainer (n-step, demonstrations); writes the bundle.
- `evaluate`, `cli`: `optserve eval looptune` (policy vs searches vs numpy).

It builds on the runtime (optserve.policies, optserve.kernels); the runtime never imports it (import
contract `runtime-not-training` in pyproject.toml).
"""
