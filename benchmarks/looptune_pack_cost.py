"""Where a large matmul kind's 1-thread time goes: the packing copies and the nest, apart, against numpy.

The kernel of a tiled template copies its packed operands into buffers at every call (kernels/packing.py)
and then runs the nest on them; the compiled module exposes each copy (`pack_in0`, `pack_in1`) and the
nest on packed operands, so each is timed alone here (best of `--repeats` calls after `--warmup`), beside
the whole kernel, the whole kernel packing into buffers numpy allocated (`kernel_ws`, as the parallel
kernels call it, against the module's own globals) and numpy's matmul of the same operands (OpenBLAS, 1
thread). Issue 36: the transposed kinds (A^T.B, A.B^T, A^T.B^T) ran 7-13 % behind OpenBLAS at 2048^3 on the
lent Xeon where the plain matmul ran 3 % behind; this says how much of that the copies are (lent Xeon: 1.3-6 %
of a call, most for A^T.B^T; the buffers' allocation changed nothing).

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_pack_cost.py --sizes 2048 --kinds matmul matmul_tt
"""

from __future__ import annotations

import argparse
import ctypes
import sys

from optserve.testing.commands import call_seconds

PACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
NEST_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def best(call, warmup: int, repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls after `warmup`."""
    return min(call_seconds(call, warmup, repeats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=["matmul", "matmul_at", "matmul_bt", "matmul_tt"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[2048])
    parser.add_argument("--templates", nargs="+", default=["6x4rv-k512-v512-r96"])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    import numpy as np
    import torch  # noqa: F401  (its OpenMP runtime first, as the service loads it)

    from optserve.kernels import tiling
    from optserve.kernels.codegen import workspace_floats
    from optserve.kernels.jit import compile_schedule, host_target
    from optserve.kernels.reference import numpy_program
    from optserve.looptune_training.suites import case

    width = host_target().vector_widths[0]
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            print("transparent huge pages:", f.read().strip(), flush=True)
    except OSError:
        pass
    rng = np.random.default_rng(0)
    for size in args.sizes:
        for kind in args.kinds:
            spec = case(kind, m=size, k=size, n=size).spec()
            arrays = [rng.standard_normal(spec.shape(t), dtype=np.float32) for t in spec.tensors]
            out, lhs, rhs = arrays
            flops = 2 * size**3
            _, program = numpy_program(spec)
            ref = best(lambda: program(lhs, rhs), args.warmup, args.repeats)  # noqa: B023
            line = [f"{kind} {size}^3: numpy {flops / ref / 1e9:.1f} GFLOPS ({ref * 1e3:.1f} ms)"]
            for name in args.templates:
                schedule = tiling.tiled_schedule(spec, tiling.TileTemplate.from_name(name), width)
                kernel = compile_schedule(spec, schedule)
                whole = best(lambda: kernel(out, lhs, rhs), args.warmup, args.repeats)  # noqa: B023
                buffers = [np.ones(max(n, 1), np.float32) for n in workspace_floats(spec, schedule)]
                parts = []
                operands = [lhs, rhs]
                for position, address in enumerate(kernel.pack_addresses):
                    if not address:
                        continue
                    copy = PACK_TYPE(address)
                    src, dst = operands[position].ctypes.data, buffers[position].ctypes.data
                    seconds = best(lambda: copy(src, dst), args.warmup, args.repeats)  # noqa: B023
                    parts.append(f"pack {spec.inputs[position].name} {seconds * 1e3:.2f} ms")
                    operands[position] = buffers[position]
                nest = NEST_TYPE(kernel.nest_address)
                pointers = [out.ctypes.data, operands[0].ctypes.data, operands[1].ctypes.data]
                alone = best(lambda: nest(*pointers), args.warmup, args.repeats)  # noqa: B023
                spaces = [out.ctypes.data, lhs.ctypes.data, rhs.ctypes.data]
                spaces += [b.ctypes.data for b in buffers]
                ws = best(lambda: kernel.workspace(*spaces), args.warmup, args.repeats)  # noqa: B023
                again = best(lambda: kernel(out, lhs, rhs), args.warmup, args.repeats)  # noqa: B023
                whole = min(whole, again)
                line.append(
                    f"  {name} (packed {','.join(schedule.pack) or '-'}): whole {flops / whole / 1e9:.1f}"
                    f" GFLOPS ({whole * 1e3:.1f} ms, {ref / whole:.2f}x numpy); on numpy's buffers"
                    f" {flops / ws / 1e9:.1f} ({ref / ws:.2f}x); nest alone on them"
                    f" {flops / alone / 1e9:.1f} ({ref / alone:.2f}x); {'; '.join(parts)}"
                )
                kernel.close()
            print("\n".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
