"""Contraction suites beyond the 64..256 matmuls: every kind, sizes 16..2048, a training and a held-out set.

Kinds are written in the einsum spec (transposed operands, batches, vectors and 2-D convolutions, direct, in
both layouts). The training suite is drawn with a fixed seed; the held-out suite is a fixed list (every kind,
at powers of two and at odd and skewed sizes) that no training shape equals, so the tile cover is scored on
shapes it never saw. Both stay within the sizes timed whole (`timed_flops`: at most 2 * 512^3 flops).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from optserve.config import LoopTuneSettings
from optserve.kernels.spec import LoopNestSpec, SpecError

KINDS: dict[str, str] = {
    "matmul": "C[m,n] += A[m,k] * B[k,n]",
    "matmul_at": "C[m,n] += A[k,m] * B[k,n]",
    "matmul_bt": "C[m,n] += A[m,k] * B[n,k]",
    "batched": "C[b,m,n] += A[b,m,k] * B[b,k,n]",
    "matvec": "y[m] += A[m,k] * x[k]",
    "vecmat": "y[n] += x[k] * A[k,n]",
    "conv_nchw": "O[n,f,y,x] += I[n,c,y+r,x+s] * W[f,c,r,s]",
    "conv_nhwc": "O[n,y,x,f] += I[n,y+r,x+s,c] * W[r,s,c,f]",
    "matmul_tt": "C[m,n] += A[k,m] * B[n,k]",  # no index contiguous everywhere: the backend packs B
}
TRAIN_SEED = 19
TRAIN_PER_KIND = 5


@dataclass(frozen=True)
class Case:
    kind: str
    sizes: tuple[tuple[str, int], ...]

    @property
    def einsum(self) -> str:
        return KINDS[self.kind]

    @property
    def name(self) -> str:
        return f"{self.kind}:" + ",".join(f"{k}={v}" for k, v in self.sizes)

    def spec(self, limits: LoopTuneSettings | None = None) -> LoopNestSpec:
        return LoopNestSpec.parse(self.einsum, dict(self.sizes), limits)


def case(kind: str, **sizes: int) -> Case:
    return Case(kind, tuple(sizes.items()))


def case_from_name(name: str) -> Case:
    """The case `Case.name` wrote (`kind:m=..,k=..`)."""
    kind, _, sizes = name.partition(":")
    if kind not in KINDS:
        raise ValueError(f"{name!r}: unknown kind {kind!r}")
    return Case(kind, tuple((key, int(value)) for key, value in (p.split("=") for p in sizes.split(","))))


HELD_OUT: tuple[Case, ...] = (
    case("matmul", m=512, k=512, n=512),
    case("matmul", m=384, k=96, n=640),
    case("matmul", m=100, k=300, n=50),
    case("matmul", m=200, k=130, n=77),
    case("matmul", m=2000, k=40, n=1000),
    case("matmul", m=16, k=2048, n=48),
    case("matmul_at", m=128, k=128, n=128),
    case("matmul_at", m=320, k=200, n=96),
    case("matmul_bt", m=256, k=256, n=256),
    case("matmul_bt", m=144, k=500, n=72),
    case("batched", b=8, m=64, k=64, n=64),
    case("batched", b=4, m=100, k=60, n=132),
    case("matvec", m=1024, k=1024),
    case("matvec", m=2000, k=700),
    case("vecmat", k=1024, n=1024),
    case("vecmat", k=700, n=1500),
    case("conv_nchw", n=1, f=32, c=32, y=30, x=30, r=3, s=3),
    case("conv_nchw", n=2, f=16, c=24, y=26, x=26, r=5, s=5),
    case("conv_nhwc", n=1, y=28, x=28, c=32, f=64, r=3, s=3),
    case("conv_nhwc", n=1, y=14, x=14, c=96, f=48, r=3, s=3),
    case("matmul_tt", m=256, k=256, n=256),
    case("matmul_tt", m=96, k=300, n=150),
)


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def _draw(kind: str, rng: random.Random) -> Case:
    def dim(low: int = 16, high: int = 512) -> int:
        return _log_uniform(rng, low, high)

    if kind in ("matmul", "matmul_at", "matmul_bt", "matmul_tt"):
        return case(kind, m=dim(32), k=dim(32), n=dim(32))
    if kind == "batched":
        return case(kind, b=dim(2, 16), m=dim(16, 160), k=dim(16, 160), n=dim(16, 160))
    if kind == "matvec":
        return case(kind, m=dim(128, 2048), k=dim(128, 2048))
    if kind == "vecmat":
        return case(kind, k=dim(128, 2048), n=dim(128, 2048))
    window = rng.choice((1, 3, 5))
    image, channels, filters = dim(8, 56), dim(8, 96), dim(8, 96)
    if kind == "conv_nchw":
        return case(kind, n=1, f=filters, c=channels, y=image, x=image, r=window, s=window)
    return case(kind, n=1, y=image, x=image, c=channels, f=filters, r=window, s=window)


def _draw_wide(kind: str, rng: random.Random) -> Case:
    """Sizes over the whole 16..2048 range (tails, non-powers of two) for the Q-network's training set."""

    def dim(low: int = 16, high: int = 2048) -> int:
        return _log_uniform(rng, low, high)

    if kind in ("matmul", "matmul_at", "matmul_bt", "matmul_tt"):
        return case(kind, m=dim(), k=dim(), n=dim())
    if kind == "batched":
        return case(kind, b=dim(2, 32), m=dim(16, 256), k=dim(16, 256), n=dim(16, 256))
    if kind == "matvec":
        return case(kind, m=dim(), k=dim())
    if kind == "vecmat":
        return case(kind, k=dim(), n=dim())
    window = rng.choice((1, 3, 5))
    image, channels, filters = dim(8, 64), dim(8, 128), dim(8, 128)
    if kind == "conv_nchw":
        return case(kind, n=1, f=filters, c=channels, y=image, x=image, r=window, s=window)
    return case(kind, n=1, y=image, x=image, c=channels, f=filters, r=window, s=window)


def wide_training_suite(per_kind: int, seed: int = TRAIN_SEED) -> list[Case]:
    """`per_kind` shapes of every kind with sizes 16..2048 (fixed seed; the tile Q-network's training set):
    none in HELD_OUT, none of the cover's training suite, each at most `timed_flops` and within the limits."""
    rng = random.Random(seed)
    kept = {c.name for c in HELD_OUT} | {c.name for c in training_suite()}
    limits = LoopTuneSettings()
    cases: list[Case] = []
    for kind in KINDS:
        drawn = 0
        while drawn < per_kind:
            candidate = _draw_wide(kind, rng)
            if candidate.name in kept:
                continue
            try:
                if candidate.spec(limits).flops > limits.timed_flops:
                    continue
            except SpecError:  # a tensor over the byte limit
                continue
            kept.add(candidate.name)
            cases.append(candidate)
            drawn += 1
    return cases


def training_suite(per_kind: int = TRAIN_PER_KIND, seed: int = TRAIN_SEED) -> list[Case]:
    """`per_kind` random shapes of every kind (fixed seed), none of them in HELD_OUT, all within limits."""
    rng = random.Random(seed)
    held = {c.name for c in HELD_OUT}
    limits = LoopTuneSettings()
    cases: list[Case] = []
    for kind in KINDS:
        drawn = 0
        while drawn < per_kind:
            candidate = _draw(kind, rng)
            if candidate.name in held or candidate.spec(limits).flops > limits.timed_flops // 2:
                continue
            cases.append(candidate)
            drawn += 1
    return cases


# Common CNN layers (name, input channels, filters, image side, window side), stride 1: the convolutions
# benchmarks/looptune_threads.py compares with PyTorch's.
CONVS = (
    ("vgg conv1_2", 64, 64, 224, 3),
    ("resnet conv2 3x3", 64, 64, 56, 3),
    ("resnet conv2 1x1 expand", 64, 256, 56, 1),
    ("resnet conv3 3x3", 128, 128, 28, 3),
    ("resnet conv4 3x3", 256, 256, 14, 3),
    ("resnet conv5 3x3", 512, 512, 7, 3),
    ("resnet conv4 1x1 reduce", 1024, 256, 14, 1),
)
