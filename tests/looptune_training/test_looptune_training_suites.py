"""The training wing's shapes: the LoopTune matmul dataset and its fixed split, the tile suites kept apart
from the held-out suite, and the greedy tile cover (looptune_training/: dataset, suites, templates)."""

from __future__ import annotations

import numpy as np

from optserve.looptune_training.dataset import matmul_benchmarks, train_test_split
from optserve.looptune_training.suites import (
    HELD_OUT,
    KINDS,
    case_from_name,
    training_suite,
    wide_training_suite,
)
from optserve.looptune_training.templates import choose_cover


def test_dataset_has_2197_matmuls_and_a_fixed_80_20_split():
    benchmarks = matmul_benchmarks()
    assert len(benchmarks) == 2197 and benchmarks[0].name == "mm64_64_64"
    train, test = train_test_split()
    assert (len(train), len(test)) == (1757, 440)
    assert not {b.name for b in train} & {b.name for b in test}
    assert train_test_split()[1] == test
    assert test[0].spec().size_of == {"m": test[0].m, "k": test[0].k, "n": test[0].n}


def test_held_out_shapes_are_never_trained_on_and_every_kind_is_in_both():
    train = training_suite()
    assert not {c.name for c in train} & {c.name for c in HELD_OUT}
    assert {c.kind for c in train} == {c.kind for c in HELD_OUT} == set(KINDS)
    assert [c.name for c in training_suite()] == [c.name for c in train]  # fixed seed
    for case in (*train, *HELD_OUT):
        case.spec()  # within the default limits


def test_cover_picks_templates_that_together_reach_every_shapes_best():
    gflops = np.array(
        [
            [10.0, 1.0, 1.0],  # best on shape 0 only
            [1.0, 10.0, 10.0],  # best on shapes 1 and 2
            [6.0, 6.0, 6.0],  # good everywhere
        ]
    )
    assert choose_cover(gflops, 2) == [2, 1]  # greedy: the all-rounder, then the best gain on top of it
    assert choose_cover(gflops, 3) == [2, 1, 0]


def test_wide_training_suite_spans_16_to_2048_every_kind_and_no_held_out_shape():
    suite = wide_training_suite(20)
    assert not {c.name for c in suite} & {c.name for c in HELD_OUT}
    assert {c.kind for c in suite} == set(KINDS) and len(suite) == 20 * len(KINDS)
    sizes = [v for c in suite for k, v in c.sizes if k in "mkn" and c.kind != "batched"]
    assert min(sizes) < 32 and max(sizes) > 1024 and any(s & (s - 1) for s in sizes)  # non-powers of two
    assert [c.name for c in wide_training_suite(20)] == [c.name for c in suite]  # fixed seed
    assert all(case_from_name(c.name) == c for c in suite)
