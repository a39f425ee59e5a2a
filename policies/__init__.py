"""policies: LoopTune at run time: the environment, its searches, the learned policy and the entry point.

- `env`: actions, availability rules, the 10 x 20 state, `Evaluator` (cached GFLOPS), `LoopTuneEnv`, and
  `SearchOutcome`, where a walk of it ends (what every search and the policy answer).
- `methods`: `SearchMethod`, the names of the ways to choose a schedule (and the baselines among them).
- `search`: greedy (lookahead 1, 2), beam DFS/BFS (width 2, 4), random, the policy, the tile methods;
  `SEARCHES` maps each `SearchMethod` to its search.
- `tiles`: the tile-template pool, the learned cover (models/looptune/tiles.json), methods tiles and
  policy_tiles (the service's default decision).
- `scheduler`: `schedule_nest(spec, method, time_limit_s, measure)` -> `ScheduleResult`, and
  `schedule_contraction` (parse, then `schedule_nest` with the default method and time limit), the entry
  point of the service and of `optserve schedule-local` (`schedule_local`).
- `policy`: the Q-network, its input features, greedy rollout, polish, the bundle in models/looptune.

Its training and evaluation (datasets, suites, templates, the trainer, `optserve eval looptune`) are in the
training wing, looptune_training/ (`optserve.looptune_training`), which nothing here imports.
"""
