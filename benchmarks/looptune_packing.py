"""What if the backend packed B of `C = A·B^T`? The cover's templates on partial sums (today) and on B packed.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_packing.py --sizes 100,256,384,512 --rounds 3

`C[m,n] += A[m,k] * B[n,k]` has k contiguous in every tensor, so the backend does not pack
(kernels/packing.py): tiled schedules vectorize k and keep vector partial sums. Packing B as `B'[k,n]`, as
the backend does for `A^T·B^T`, would turn it into an ordinary matmul (n vectorized, A broadcast) at the
price of copying B at every call. For this run only, `packed_layout` is replaced by one that always moves
the output's last index last; every template of the bundled cover is compiled both ways and timed in
interleaved rounds with numpy single-thread, best per variant. Prints one line per size.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402

BT = "C[m,n] += A[m,k] * B[n,k]"


def always_packed(spec):
    """The backend's packing with its "already contiguous" exit removed: every input strided along the
    output's last index gets that dimension moved last."""
    from optserve.kernels.packing import PackedLayout
    from optserve.kernels.spec import LoopNestSpec, TensorRef

    vector = spec.output.dims[-1][0]
    inputs, orders = [], []
    for tensor in spec.inputs:
        if spec.strides(tensor)[vector] in (0, 1):
            inputs.append(tensor)
            orders.append(None)
            continue
        (where,) = [j for j, dim in enumerate(tensor.dims) if vector in dim]
        order = tuple(j for j in range(len(tensor.dims)) if j != where) + (where,)
        inputs.append(TensorRef(f"{tensor.name}_packed", tuple(tensor.dims[j] for j in order)))
        orders.append(order)
    packed = LoopNestSpec(output=spec.output, inputs=(inputs[0], inputs[1]), sizes=spec.sizes)
    return PackedLayout(packed, (orders[0], orders[1]))


def time_size(size: int, rounds: int) -> dict[str, tuple[float, str]]:
    import optserve.kernels.codegen as codegen
    import optserve.kernels.tiling as tiling
    from optserve.kernels.jit import compile_schedule, host_target
    from optserve.kernels.measure import measure
    from optserve.kernels.packing import packed_layout
    from optserve.kernels.reference import numpy_gflops_of
    from optserve.kernels.spec import LoopNestSpec
    from optserve.kernels.tiling import tiled_schedule
    from optserve.policies.tiles import fits, load_cover

    spec = LoopNestSpec.parse(BT, {"m": size, "k": size, "n": size})
    target = host_target()
    kernels = {}
    try:
        for variant, layout_fn in (("partial sums", packed_layout), ("B packed", always_packed)):
            codegen.packed_layout = tiling.packed_layout = layout_fn
            for template in load_cover():
                if fits(template, target):
                    schedule = tiled_schedule(spec, template, target.vector_widths[0])
                    kernels[(variant, template.name())] = compile_schedule(spec, schedule, target=target)
    finally:
        codegen.packed_layout = tiling.packed_layout = packed_layout
    best = dict.fromkeys(kernels, 0.0)
    numpy = 0.0
    try:
        for _ in range(rounds):
            for key, kernel in kernels.items():
                best[key] = max(best[key], measure(kernel, runs=5, warmup_calls=3).gflops)
            numpy = max(numpy, numpy_gflops_of(spec, runs=5))
    finally:
        for kernel in kernels.values():
            kernel.close()
    out = {"numpy": (numpy, "")}
    for variant in ("partial sums", "B packed"):
        gflops, name = max((g, n) for (v, n), g in best.items() if v == variant)
        out[variant] = (gflops, name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,256,384,512", help="m = k = n, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        result = time_size(size, args.rounds)
        numpy = result["numpy"][0]
        cells = [f"{v} {g:.1f} ({n}, {g / numpy:.2f}x numpy)" for v, (g, n) in result.items() if v != "numpy"]
        print(f"A·B^T {size}^3: numpy {numpy:.1f}; " + "; ".join(cells) + f"; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
