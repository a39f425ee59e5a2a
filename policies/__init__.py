"""policies: the LoopTune environment, its search baselines and the entry point that schedules a nest.

- `env`: actions, availability rules, the 10 x 20 state, `Evaluator` (cached GFLOPS), `LoopTuneEnv`.
- `search`: greedy (lookahead 1, 2), beam DFS/BFS (width 2, 4), random; `SEARCHES` maps names to them.
- `dataset`: the 2197 matmuls (M, K, N in 64..256 step 16) and the fixed 80/20 split.
- `schedule`: `schedule_nest(spec, method, time_limit_s, measure)` -> `ScheduleResult`.
"""
