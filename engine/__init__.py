"""The inference engine: pass-ordering candidates from a causal LM (thesis ch. 5 and 6).

- `interface`: the seam the service codes against (`Engine.generate`, `SamplingOptions`, `Candidate`, ...);
- `engine.ModelEngine`: that interface for one model directory, on the torch or the vLLM backend;
- `profile`: profile.json, the model's prompt and answer format and how it spells pass lists (`passformer`:
  the bundled model's);
- `grammar`: the answer regex as a token automaton (outlines_core) over the model's tokenizer;
- `sampling`: greedy, priority sampling (Algorithm 1) and its parallel form, nucleus sampling;
- `backend`: the decode seam; `torch_backend` and `vllm_backend` implement it; `llama_forward`: the torch
  backend's compact Llama forward with an in-place KV cache (CPU decoding without framework overhead);
- `feedback`: compiler-feedback retry, the one loop the service, the tests and the benchmark run.

A random stand-in model directory for tests and benchmarks is built by `optserve.passlm.tiny_model` (the
training wing: it trains its tokenizer).
"""
