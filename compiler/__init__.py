"""The LLVM compiler core: IR parsing and normalization, the pass vocabulary, cost functions, pass-list
evaluation in crash-isolated workers, a result cache and the autotuner.

Modules: `interface` (the seam the service codes against: `CandidateCompiler`, `Evaluation`),
`ir` (parse, verify, normalize, split, count), `passes` (vocabulary, grammar, `opt` replay),
`cost` (objectives), `pipeline` (apply a pass list, evaluate a candidate), `workers` (CompilerPool),
`cache` (content-addressed results), `autotune` (random search + minimization), `cli` (`optserve autotune`).
"""
