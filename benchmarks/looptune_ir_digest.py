"""A digest of the IR the backend generates for the suites' shapes: two checkouts that print the same one
generate byte-identical kernels (so the same speed) for the kinds it covers.

    python benchmarks/looptune_ir_digest.py --skip matmul_bt,matmul_tt

Every held-out and training shape of looptune_training/suites.py whose kind is not skipped, every template
of the bundled cover and the first `--pool` of the pool that fits, and the base schedule, for an AVX-512 and
an AVX2 target. To compare with another commit, put its tree first on PYTHONPATH (an `optserve` namespace of
its optserve/*.py, kernels/ and policies/, as benchmarks/looptune_lent_setup.sh makes one).
"""

from __future__ import annotations

import argparse
import hashlib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", default="", help="comma-separated kinds left out")
    parser.add_argument("--pool", type=int, default=40, help="pool templates after the cover")
    args = parser.parse_args()

    import optserve
    from optserve.kernels.codegen import Target, generate_ir
    from optserve.kernels.schedule import Schedule
    from optserve.kernels.spec import SpecError
    from optserve.kernels.tiling import tiled_schedule
    from optserve.looptune_training.suites import HELD_OUT, training_suite
    from optserve.policies.tiles import fits, load_cover, template_pool

    skipped = set(filter(None, args.skip.split(",")))
    targets = (Target(vector_widths=(16, 8), accumulator_registers=28), Target(vector_widths=(8,)))
    digest, kernels = hashlib.sha1(), 0
    for case in [*HELD_OUT, *training_suite()]:
        if case.kind in skipped:
            continue
        spec = case.spec()
        for target in targets:
            schedules = [
                tiled_schedule(spec, t, target.vector_widths[0])
                for t in [*load_cover(), *template_pool()[: args.pool]]
                if fits(t, target)
            ]
            for schedule in [*schedules, Schedule.base(spec)]:
                try:
                    digest.update(generate_ir(spec, schedule, target).encode())
                except SpecError as err:  # a refused schedule: the refusal is part of the behaviour
                    digest.update(str(err).encode())
                kernels += 1
    print(f"{kernels} kernels, IR digest {digest.hexdigest()} (optserve from {list(optserve.__path__)[0]})")


if __name__ == "__main__":
    main()
