"""Does packing B block by block, just before its use, beat packing it whole per call? A 1-thread A/B on the
large matmul kinds, composed from compiled kernels of one (m x kc x nc) block.

A tiled kernel (kernels/codegen.py) copies each packed operand whole into its buffer, then runs the nest:
at 2048^3 B's 16 MiB of panels are written out and read back from memory. GotoBLAS and BLIS copy one
(kc x nc) block of B just before the loops that use it, so the packed block is still in L2 when the nest
first reads it. Both orders are composed here from one kernel compiled for the block's sub-problem
(C[:, n-block] += A[:, k-block] . B[k-block, n-block] of the same kind and template), on operands cut into
dense blocks beforehand (outside the timing), so they differ only in when the copies run:

- `whole`: every block of B (and of A, where the kind packs A) copied into buffers of its own first, then
  every block's nest, in the template's order (n-blocks outer, k-blocks inside): the current kernels' order;
- `block`: for each (n-block, k-block) the copy of that B block into one buffer (1 MiB at 512 x 512), then
  its nest (A's blocks copied first, as in `whole`);
- `block+a`: A's block copied again just before each nest too (where the kind packs A).

Beside them `nests` (every block's nest alone on buffers copied beforehand), the real kernel on the whole
problem and numpy (OpenBLAS, 1 thread). Each timing is the median of `--repeats` calls after `--warmup`, the
variants interleaved in each of `--rounds` rounds (each round starting one variant later); a line gives the
median over rounds. The blocked operands read A and C with a block's row stride rather than the whole's, and
the composed nests ran 4-9 % behind the real kernel on the lent Xeon at 2048^3 (far more at 1000^3, blocks of
500 with a tail tile each), so compare `block` with `whole` (the question), not with the real kernel. Lent
Xeon, 1 thread, 2048^3, 6x4rv-k512-v512-r96: `block` against `whole` -0.3 to +2.0 % on the four kinds over
5 rotated rounds, -8 to +12 % in a 3-round run on a fresh machine; `block+a` 3-4 % behind `block`
(docs/bench/looptune_all_cores.md).

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_block_pack_ab.py --sizes 1000 2048 --rounds 3
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys

from optserve.testing.commands import call_seconds

PACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
NEST_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def median_seconds(call, warmup: int, repeats: int) -> float:
    """Median seconds of `repeats` calls after `warmup`."""
    return statistics.median(call_seconds(call, warmup, repeats))


def blocks_of(total: int, block: int) -> list[tuple[int, int]]:
    """Equal blocks of at most `block` elements covering `total` (1000 -> two of 500)."""
    count = -(-total // block)
    step = -(-total // count)
    return [(start, min(total, start + step)) for start in range(0, total, step)]


class Composed:
    """The whole problem run as per-block copies and nests of one block kernel (see the module docstring)."""

    def __init__(self, kind: str, size: int, kc: int, nc: int, template: str, arrays, width: int):
        import numpy as np

        from optserve.kernels import tiling
        from optserve.kernels.codegen import workspace_floats
        from optserve.kernels.jit import compile_schedule
        from optserve.looptune_training.suites import case

        out, lhs, rhs = arrays
        self.out = out
        self.k_blocks = blocks_of(size, kc)
        self.n_blocks = blocks_of(size, nc)
        kb = self.k_blocks[0][1] - self.k_blocks[0][0]
        nb = self.n_blocks[0][1] - self.n_blocks[0][0]
        assert all(b - a == kb for a, b in self.k_blocks) and all(b - a == nb for a, b in self.n_blocks)
        spec = case(kind, m=size, k=kb, n=nb).spec()
        self.spec = spec
        # the block packs what the whole packs, however small (a 500 x 500 block of B is under PANEL_FLOATS)
        floats, tiling.PANEL_FLOATS = tiling.PANEL_FLOATS, 1
        try:
            schedule = tiling.tiled_schedule(spec, tiling.TileTemplate.from_name(template), width)
        finally:
            tiling.PANEL_FLOATS = floats
        self.pack = schedule.pack
        self.kernel = compile_schedule(spec, schedule)
        self.nest = NEST_TYPE(self.kernel.nest_address)
        self.copies = [PACK_TYPE(a) if a else None for a in self.kernel.pack_addresses]
        floats = workspace_floats(spec, schedule)
        dims = [[d[0] for d in t.dims] for t in spec.tensors]

        def cut(array, names, k_range, n_range):
            ranges = {"k": k_range, "n": n_range}
            return np.ascontiguousarray(array[tuple(slice(*ranges.get(d, (None, None))) for d in names)])

        # dense blocks: A per k-block, B per (n-block, k-block), C per n-block
        self.a = [cut(lhs, dims[1], kr, None) for kr in self.k_blocks]
        self.b = [[cut(rhs, dims[2], kr, nr) for kr in self.k_blocks] for nr in self.n_blocks]
        self.c = [cut(out, dims[0], None, nr) for nr in self.n_blocks]
        self.a_ws = [np.zeros(max(floats[0], 1), np.float32) for _ in self.a] if self.copies[0] else None
        self.b_ws = [[np.zeros(max(floats[1], 1), np.float32) for _ in row] for row in self.b]
        self.b_one = np.zeros(max(floats[1], 1), np.float32)
        self.a_one = np.zeros(max(floats[0], 1), np.float32)
        self.spec_sizes = (size, kb, nb)

    def _a_sources(self) -> list[int]:
        if self.copies[0] is None:
            return [a.ctypes.data for a in self.a]
        return [w.ctypes.data for w in self.a_ws]

    def _pack_a(self) -> None:
        if self.copies[0] is not None:
            for a, w in zip(self.a, self.a_ws, strict=True):
                self.copies[0](a.ctypes.data, w.ctypes.data)

    def whole(self) -> None:
        self._pack_a()
        copy = self.copies[1]
        for row, ws in zip(self.b, self.b_ws, strict=True):
            for b, w in zip(row, ws, strict=True):
                copy(b.ctypes.data, w.ctypes.data)
        a = self._a_sources()
        for c, ws in zip(self.c, self.b_ws, strict=True):
            for ai, w in zip(a, ws, strict=True):
                self.nest(c.ctypes.data, ai, w.ctypes.data)

    def block(self) -> None:
        self._pack_a()
        copy, one = self.copies[1], self.b_one.ctypes.data
        a = self._a_sources()
        for c, row in zip(self.c, self.b, strict=True):
            for ai, b in zip(a, row, strict=True):
                copy(b.ctypes.data, one)
                self.nest(c.ctypes.data, ai, one)

    def block_a(self) -> None:
        copy_b, copy_a = self.copies[1], self.copies[0]
        one_b, one_a = self.b_one.ctypes.data, self.a_one.ctypes.data
        for c, row in zip(self.c, self.b, strict=True):
            for a, b in zip(self.a, row, strict=True):
                copy_a(a.ctypes.data, one_a)
                copy_b(b.ctypes.data, one_b)
                self.nest(c.ctypes.data, one_a, one_b)

    def nests_only(self) -> None:
        a = self._a_sources()
        for c, ws in zip(self.c, self.b_ws, strict=True):
            for ai, w in zip(a, ws, strict=True):
                self.nest(c.ctypes.data, ai, w.ctypes.data)

    def result(self, dims_out: list[str]):
        import numpy as np

        return np.concatenate(self.c, axis=dims_out.index("n"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["matmul", "matmul_at", "matmul_bt", "matmul_tt"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 2048])
    parser.add_argument("--template", default="6x4rv-k512-v512-r96")
    parser.add_argument("--kc", type=int, default=512)
    parser.add_argument("--nc", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import numpy as np
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.kernels import tiling
    from optserve.kernels.jit import compile_schedule, host_target
    from optserve.kernels.reference import numpy_program
    from optserve.looptune_training.suites import case

    width = host_target().vector_widths[0]
    rng = np.random.default_rng(0)
    for size in args.sizes:
        for kind in args.kinds:
            spec = case(kind, m=size, k=size, n=size).spec()
            arrays = [rng.standard_normal(spec.shape(t), dtype=np.float32) for t in spec.tensors]
            arrays[0][:] = 0
            out, lhs, rhs = arrays
            _, program = numpy_program(spec)
            schedule = tiling.tiled_schedule(spec, tiling.TileTemplate.from_name(args.template), width)
            kernel = compile_schedule(spec, schedule)
            composed = Composed(kind, size, args.kc, args.nc, args.template, arrays, width)
            assert composed.pack == schedule.pack, (composed.pack, schedule.pack)
            dims_out = [d[0] for d in spec.output.dims]
            # correctness of the composition: each variant once from zero against numpy
            expect = program(lhs, rhs)
            variants = {"whole": composed.whole, "block": composed.block}
            if composed.copies[0] is not None:
                variants["block+a"] = composed.block_a
            for name, call in variants.items():
                for c in composed.c:
                    c[:] = 0
                call()
                error = float(np.max(np.abs(composed.result(dims_out) - expect)))
                assert error < 1e-2 * np.sqrt(size), (kind, size, name, error)
            timed = {
                "numpy": lambda: program(lhs, rhs),  # noqa: B023
                "kernel": lambda: kernel(out, lhs, rhs),  # noqa: B023
                **variants,
                "nests": composed.nests_only,
            }
            seconds: dict[str, list[float]] = {name: [] for name in timed}
            names = list(timed)
            for round_ in range(args.rounds):  # each round starts one variant later (no fixed position)
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    seconds[name].append(median_seconds(timed[name], args.warmup, args.repeats))
            flops = 2 * size**3
            median = {name: statistics.median(values) for name, values in seconds.items()}
            cells = [
                f"{name} {flops / value / 1e9:.1f} ({value * 1e3:.2f} ms)" for name, value in median.items()
            ]
            gain = median["whole"] / median["block"] - 1
            print(
                f"{kind} {size}^3 blocks {composed.spec_sizes} packed {','.join(composed.pack) or '-'}:"
                f" {'; '.join(cells)}; block vs whole {gain * 100:+.1f} %",
                flush=True,
            )
            kernel.close()
            composed.kernel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
