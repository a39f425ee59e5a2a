"""Structure-aware mutations of real LLVM bitcode, for fuzzing the IR intake beyond its magic bytes.

A bitcode file is a bitstream: after the magic `BC\\xC0\\xDE`, blocks (IDENTIFICATION, MODULE, STRTAB,
SYMTAB at the top level), each opened by ENTER_SUBBLOCK (abbreviation id 1, block id as VBR-8, the new
abbreviation width as VBR-4, padding to 32 bits, then the block's length in 32-bit words) and 32-bit
aligned. `top_level_blocks` finds those blocks; the mutations then work on the structure (drop, repeat,
swap blocks, splice a block or a word-aligned span from another module, edit a block's length word) as
well as on the bits (flips, truncations, interesting values), so that inputs get past the magic and the
block framing into LLVM's record readers, where the bugs live.

Every mutator takes a `random.Random`: hypothesis drives them through `st.randoms()` (derandomized runs
in the test suite, shrinking on failure) and the long campaign (benchmarks/reliability_fuzz.py) through a
plain seeded Random, which costs far less per input than hypothesis' own engine.
"""

from __future__ import annotations

import functools
import random
import struct
import subprocess
from dataclasses import dataclass

from optserve.testing import TEST_DATA

DATA = TEST_DATA
MAGIC = b"BC\xc0\xde"
# Seed units: C sources of the test data, at two optimization levels, as optcc sends them (-Oz without
# LLVM's passes) and fully optimized (different record kinds: vectors, metadata, attributes).
SEED_SOURCES = sorted((DATA / "c").glob("*.c"))
SEED_FLAGS = (("-Oz", "-Xclang", "-disable-llvm-passes"), ("-O2", "-g"))
INTERESTING_WORDS = (0, 1, 2, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


@dataclass(frozen=True)
class Block:
    """A top-level block: bytes [start, end) of the file (its ENTER_SUBBLOCK header included), its id."""

    start: int
    end: int
    block_id: int
    length_at: int  # byte offset of the block's 32-bit length word


def read_bits(data: bytes, position: int, width: int) -> int:
    """`width` bits at bit `position`, LSB first (the bitstream's order)."""
    first, last = position // 8, (position + width + 7) // 8
    if last > len(data):
        raise ValueError("past the end")
    return (int.from_bytes(data[first:last], "little") >> (position % 8)) & ((1 << width) - 1)


def read_vbr(data: bytes, position: int, width: int) -> tuple[int, int]:
    """A variable-width integer of `width`-bit chunks at `position`: (value, position after it)."""
    value, shift = 0, 0
    while True:
        chunk = read_bits(data, position, width)
        position += width
        value |= (chunk & ((1 << (width - 1)) - 1)) << shift
        shift += width - 1
        if not chunk >> (width - 1):
            return value, position
        if shift > 64:
            raise ValueError("VBR too long")


def top_level_blocks(data: bytes) -> list[Block]:
    """The file's top-level blocks in order (none for a file that is not raw bitcode)."""
    if not data.startswith(MAGIC):
        return []
    blocks, position = [], len(MAGIC) * 8
    try:
        while position + 64 <= len(data) * 8:
            if read_bits(data, position, 2) != 1:  # not ENTER_SUBBLOCK (abbreviation width 2 at top level)
                break
            start = position // 8
            block_id, after = read_vbr(data, position + 2, 8)
            _, after = read_vbr(data, after, 4)
            after = (after + 31) // 32 * 32
            words = read_bits(data, after, 32)
            end = after // 8 + 4 + 4 * words
            if end > len(data):
                break
            blocks.append(Block(start, end, block_id, after // 8))
            position = end * 8
    except ValueError:
        pass
    return blocks


SEEDS = DATA / "reliability" / "bitcode_seeds"


@functools.cache
def seeds() -> tuple[bytes, ...]:
    """The seed modules: tests/data/reliability/bitcode_seeds/*.bc (each of SEED_SOURCES at each of
    SEED_FLAGS, by `make_seeds`), so that hosts without clang-19 fuzz the same inputs."""
    made = tuple(path.read_bytes() for path in sorted(SEEDS.glob("*.bc")))
    if not made:
        raise RuntimeError(f"no seed bitcode in {SEEDS}: run bitcode_mutations.make_seeds() (clang-19)")
    return made


def make_seeds() -> None:
    """Write the seed modules with clang-19, from the repository root (relative source paths, so the
    modules do not name this checkout's folder)."""
    SEEDS.mkdir(parents=True, exist_ok=True)
    root = DATA.parent.parent
    for source in SEED_SOURCES:
        for index, flags in enumerate(SEED_FLAGS):
            out = SEEDS / f"{source.stem}-{index}.bc"
            command = ["clang-19", *flags, "-emit-llvm", "-c", str(source.relative_to(root)), "-o", str(out)]
            subprocess.run(command, capture_output=True, check=True, cwd=root)


def mutate(rng: random.Random, seed: bytes, other: bytes) -> bytes:
    """`seed` with 1-4 mutations, structural or bitwise; `other` is a second module to splice from."""
    data = seed
    for _ in range(rng.randint(1, 4)):
        data = rng.choice(MUTATORS)(rng, data, other)
    return data


def _drop_block(rng, data, other):
    blocks = top_level_blocks(data)
    if not blocks:
        return _flip_bits(rng, data, other)
    block = rng.choice(blocks)
    return data[: block.start] + data[block.end :]


def _repeat_block(rng, data, other):
    blocks = top_level_blocks(data)
    if not blocks:
        return _flip_bits(rng, data, other)
    block = rng.choice(blocks)
    return data[: block.end] + data[block.start : block.end] * rng.randint(1, 3) + data[block.end :]


def _swap_blocks(rng, data, other):
    blocks = top_level_blocks(data)
    if len(blocks) < 2:
        return _flip_bits(rng, data, other)
    a, b = sorted(rng.sample(blocks, 2), key=lambda block: block.start)
    return (
        data[: a.start]
        + data[b.start : b.end]
        + data[a.end : b.start]
        + data[a.start : a.end]
        + data[b.end :]
    )


def _splice_block(rng, data, other):
    """A block of `data` replaced by the other module's block of the same id (or any of its blocks)."""
    mine, theirs = top_level_blocks(data), top_level_blocks(other)
    if not mine or not theirs:
        return _splice_words(rng, data, other)
    block = rng.choice(mine)
    same = [b for b in theirs if b.block_id == block.block_id] or theirs
    donor = rng.choice(same)
    return data[: block.start] + other[donor.start : donor.end] + data[block.end :]


def _splice_words(rng, data, other):
    """A word-aligned span of `data` replaced by one of the other module (blocks are word-aligned)."""
    words, donor_words = len(data) // 4, len(other) // 4
    if words < 2 or donor_words < 2:
        return data + other
    start = rng.randrange(1, words)
    end = rng.randrange(start, min(words, start + 64) + 1)
    take = rng.randrange(1, donor_words)
    span = rng.randint(1, min(64, donor_words - take))
    return data[: start * 4] + other[take * 4 : (take + span) * 4] + data[end * 4 :]


def _splice_inside_block(rng, data, other):
    """Words inside a block's body replaced by words from the other module's block of the same id: the
    framing holds, the records inside do not."""
    mine = top_level_blocks(data)
    theirs = {b.block_id: b for b in top_level_blocks(other)}
    candidates = [b for b in mine if b.block_id in theirs and b.end - b.length_at > 8]
    if not candidates:
        return _splice_words(rng, data, other)
    block = rng.choice(candidates)
    donor = theirs[block.block_id]
    body, donor_body = range(block.length_at + 4, block.end, 4), range(donor.length_at + 4, donor.end, 4)
    if len(body) < 1 or len(donor_body) < 1:
        return _splice_words(rng, data, other)
    at, take = rng.choice(body), rng.choice(donor_body)
    span = min(rng.randint(1, 16) * 4, block.end - at, donor.end - take)
    return data[:at] + other[take : take + span] + data[at + span :]


def _edit_length(rng, data, other):
    """A block's length word set to an interesting value, or off by a little."""
    blocks = top_level_blocks(data)
    if not blocks:
        return _interesting_word(rng, data, other)
    block = rng.choice(blocks)
    (words,) = struct.unpack_from("<I", data, block.length_at)
    value = rng.choice([*INTERESTING_WORDS, words + 1, max(words - 1, 0), words * 2])
    return data[: block.length_at] + struct.pack("<I", value & 0xFFFFFFFF) + data[block.length_at + 4 :]


def _truncate(rng, data, other):
    """Cut at a random byte, at a word boundary, or at a block's end or inside its header."""
    if len(data) <= len(MAGIC):
        return data
    blocks = top_level_blocks(data)
    points = [rng.randrange(len(MAGIC), len(data)), rng.randrange(1, len(data) // 4 + 1) * 4]
    points += [b.end for b in blocks] + [b.length_at + rng.randint(0, 7) for b in blocks]
    return data[: min(rng.choice(points), len(data))]


def _flip_bits(rng, data, other):
    if len(data) <= len(MAGIC):
        return data
    edited = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(MAGIC), len(edited))  # the magic stays: the input reaches the reader
        edited[at] ^= 1 << rng.randrange(8)
    return bytes(edited)


def _interesting_word(rng, data, other):
    if len(data) < len(MAGIC) + 4:
        return data
    at = rng.randrange(len(MAGIC), len(data) - 3)
    return data[:at] + struct.pack("<I", rng.choice(INTERESTING_WORDS)) + data[at + 4 :]


def _random_bytes(rng, data, other):
    at = rng.randrange(len(MAGIC), max(len(data), len(MAGIC) + 1))
    size = rng.randint(1, 32)
    return data[:at] + bytes(rng.getrandbits(8) for _ in range(size)) + data[at + size :]


MUTATORS = (
    _drop_block,
    _repeat_block,
    _swap_blocks,
    _splice_block,
    _splice_words,
    _splice_inside_block,
    _edit_length,
    _truncate,
    _flip_bits,
    _flip_bits,
    _interesting_word,
    _random_bytes,
)


def mutated_bitcode(rng: random.Random) -> bytes:
    """One input: a seed module with mutations (another seed to splice from)."""
    pool = seeds()
    return mutate(rng, rng.choice(pool), rng.choice(pool))
