"""The LoopTune matmul set: 2197 nests `C[m,n] += A[m,k] * B[k,n]`, M, K, N in 64..256 step 16.

Names follow the published files (`mmM_K_N`). The 80/20 train/test split is a fixed-seed shuffle, so every
run and every machine gets the same 1757 training and 440 test nests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from optserve.config import LoopTuneSettings
from optserve.kernels.spec import LoopNestSpec

MATMUL_EINSUM = "C[m,n] += A[m,k] * B[k,n]"
DIM_VALUES = tuple(range(64, 257, 16))
SPLIT_SEED = 0
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class Benchmark:
    name: str  # mmM_K_N
    m: int
    k: int
    n: int

    @property
    def sizes(self) -> dict[str, int]:
        return {"m": self.m, "k": self.k, "n": self.n}

    def spec(self, limits: LoopTuneSettings | None = None) -> LoopNestSpec:
        return LoopNestSpec.parse(MATMUL_EINSUM, self.sizes, limits)


def matmul_benchmarks() -> list[Benchmark]:
    """All 2197 nests, ordered by (M, K, N)."""
    return [Benchmark(f"mm{m}_{k}_{n}", m, k, n) for m in DIM_VALUES for k in DIM_VALUES for n in DIM_VALUES]


def train_test_split(seed: int = SPLIT_SEED) -> tuple[list[Benchmark], list[Benchmark]]:
    """(train, test): 1757 and 440 nests, a fixed-seed shuffle of the whole set."""
    shuffled = matmul_benchmarks()
    random.Random(seed).shuffle(shuffled)
    n_test = math.ceil(len(shuffled) * TEST_FRACTION)
    return shuffled[n_test:], shuffled[:n_test]
