"""Packing an operand: the cover's templates on each layout of the four matmul layouts, beside numpy.

    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_packing.py --sizes 256,512 --rounds 3
    OPENBLAS_NUM_THREADS=1 python benchmarks/looptune_packing.py --kinds "A·B,A^T·B,A·B^T,A^T·B^T" \
        --variants blocked,a-transposed,a-packed --sizes 256,512 --rounds 3

Per contraction and size, every template of the bundled cover is compiled in each variant and timed in
interleaved rounds with numpy single-thread (best per variant):
- `partial sums` (A·B^T only): the unpacked twins (`-u`): k vectorized, vector partial sums, B read in
  place. This is what the backend did for A·B^T before packing was a template option.
- `packed, element copy`: B packed as `B'[k,n]` by the copy the backend used before, one element at a
  time in packed order (for A^T·B^T, what it did before; the copy reads B at a stride of k floats).
- `packed, blocked`: B packed by the blocked transpose (kernels/packing.py): vector tiles transposed in
  registers; A read in place (the schedules' `pack` line dropped): the backend before A was packed. For
  A·B and A^T·B nothing else is packed: the cover as it is.
- `A transposed` (A^T·B, A^T·B^T): A read `A[k,m]` copied as `A'[m,k]` by the blocked transpose (the
  schedules' `pack A`, panels turned off), B as in `packed, blocked`.
- `A packed` (A^T·B, A^T·B^T): A copied in panels (kernels/packing.py: the register tile's rows
  contiguous at each reduction step), B as in `packed, blocked`: what the cover's templates do now.
A variant that makes the same kernels as `packed, blocked` for a kind is not timed for it.
Prints one line per contraction and size; `--json-out` keeps the numbers.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

KINDS = {
    "A·B": "C[m,n] += A[m,k] * B[k,n]",
    "A^T·B": "C[m,n] += A[k,m] * B[k,n]",
    "A·B^T": "C[m,n] += A[m,k] * B[n,k]",
    "A^T·B^T": "C[m,n] += A[k,m] * B[n,k]",
}
VARIANTS = ("partial sums", "packed, element copy", "packed, blocked", "A transposed", "A packed")
SLUGS = dict(zip(("partial", "element", "blocked", "a-transposed", "a-packed"), VARIANTS, strict=True))


@contextlib.contextmanager
def element_copy():
    """The copy before the blocked transpose: one element at a time in packed order (a single scalar tile
    over the whole matrix)."""
    import optserve.kernels.codegen as codegen
    import optserve.kernels.packing as packing

    original = codegen.pack_function_ir

    def copy(name, shape, order, width=1):
        return original(name, shape, order, 1)

    saved = packing.SCALAR_BLOCK
    codegen.pack_function_ir, packing.SCALAR_BLOCK = copy, 1 << 30
    try:
        yield
    finally:
        codegen.pack_function_ir, packing.SCALAR_BLOCK = original, saved


@contextlib.contextmanager
def no_panels():
    """A packed by the blocked transpose as A'[m,k], never in panels."""
    import optserve.kernels.codegen as codegen

    original = codegen.schedule_panels
    codegen.schedule_panels = lambda spec, schedule: (None, None)
    try:
        yield
    finally:
        codegen.schedule_panels = original


def compile_variant(spec, variant: str, target) -> dict:
    from optserve.kernels.jit import compile_schedule
    from optserve.kernels.tiling import tiled_schedule
    from optserve.policies.tiles import fits, load_cover, unpacked

    templates = unpacked(load_cover()) if variant == "partial sums" else list(load_cover())
    kernels = {}
    copy = element_copy() if variant == "packed, element copy" else contextlib.nullcontext()
    with copy, no_panels() if variant == "A transposed" else contextlib.nullcontext():
        for template in templates:
            if fits(template, target):
                schedule = tiled_schedule(spec, template, target.vector_widths[0])
                if variant not in ("A packed", "A transposed"):
                    schedule = dataclasses.replace(schedule, pack=())
                kernels[template.name()] = compile_schedule(spec, schedule, target=target)
    return kernels


def applies(variant: str, spec) -> bool:
    """The variant makes kernels of its own for this contraction."""
    from optserve.kernels.packing import packed_layout, row_packable

    if variant == "partial sums":
        return spec.text() == KINDS["A·B^T"]
    if variant == "packed, element copy":
        return packed_layout(spec) is not None
    if variant in ("A packed", "A transposed"):
        return bool(row_packable(spec))
    return True


def time_case(einsum: str, size: int, rounds: int, variants: list[str]) -> dict:
    from optserve.kernels.jit import host_target
    from optserve.kernels.measure import measure
    from optserve.kernels.reference import numpy_gflops_of
    from optserve.kernels.spec import LoopNestSpec

    spec = LoopNestSpec.parse(einsum, {"m": size, "k": size, "n": size})
    target = host_target()
    variants = [v for v in variants if applies(v, spec)]
    kernels = {(v, name): k for v in variants for name, k in compile_variant(spec, v, target).items()}
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
    out = {"numpy": numpy}
    for variant in variants:
        gflops, name = max((g, n) for (v, n), g in best.items() if v == variant)
        out[variant] = {"gflops": gflops, "template": name, "ratio": gflops / numpy}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512", help="m = k = n, comma-separated")
    parser.add_argument("--kinds", default="A·B^T,A^T·B^T", help="comma-separated: " + ", ".join(KINDS))
    parser.add_argument(
        "--variants",
        default="partial,element,blocked",
        help="comma-separated: " + ", ".join(f"{slug} ({label})" for slug, label in SLUGS.items()),
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--json-out", help="write the results here")
    args = parser.parse_args()
    from optserve.kernels.jit import host_description

    results = []
    for kind in args.kinds.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            result = time_case(KINDS[kind], size, args.rounds, [SLUGS[v] for v in args.variants.split(",")])
            numpy = result["numpy"]
            cells = [
                f"{v} {r['gflops']:.1f} ({r['template']}, {r['ratio']:.2f}x)"
                for v, r in result.items()
                if v != "numpy"
            ]
            load = os.getloadavg()[0]
            print(
                f"{kind} {size}^3: numpy {numpy:.1f}; " + "; ".join(cells) + f"; load {load:.1f}", flush=True
            )
            results.append({"kind": kind, "size": size, "load": load, **result})
    if args.json_out:
        meta = {"cpu": host_description(), "cores": os.cpu_count(), "rounds": args.rounds}
        Path(args.json_out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
