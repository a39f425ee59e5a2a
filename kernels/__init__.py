"""kernels: a LoopNest-like loop-nest compiler on llvmlite (thesis ch. 3).

- `spec`: `LoopNestSpec.parse(einsum, sizes, limits)` validates a float32 contraction (`SpecError` if not).
- `schedule`: `Schedule` (compute and write-back nests of `Loop(index, size, tail)`), its text form.
- `codegen`: schedule -> LLVM IR text (vectorized innermost loop, register tile, unrolling, exact order).
- `tiling`: `tiled_schedule(spec, TileTemplate, width)`: register tile, cache blocks, unroll-and-jam.
- `jit`: `compile_schedule(spec, schedule)` -> `CompiledKernel` (MCJIT for the host CPU).
- `measure`: `measure(kernel)` GFLOPS (warm-up, best of N) and `peak_gflops()`.
- `reference`: numpy's program for a contraction (matmul on views, im2col, einsum) and its GFLOPS.
"""
