"""Field edits of LLVM bitcode records: a bitstream walker that finds every record's fields in a valid
module, and a mutation that rewrites one field's value in place.

bitcode_mutations.py works on the framing (top-level blocks, word spans, bits); this goes one level down,
into the records LLVM's readers decode (types, constants, instructions, metadata, symbol names). The walker
follows the bitstream container format: abbreviation ids of the block's width (0 END_BLOCK, 1
ENTER_SUBBLOCK, 2 DEFINE_ABBREV, 3 UNABBREV_RECORD, 4+ the block's abbreviations, BLOCKINFO's first), and
records either unabbreviated (code, count, operands as VBR-6) or through an abbreviation (literal, fixed,
VBR, array, char6 and blob operands). Every fixed or VBR field it reads (record codes, operands, array
elements) is a `Field`; an edit writes a new value with exactly the same bits (a VBR keeps its number of
chunks), so nothing after the field shifts and the edited record is the only thing that changes.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from optserve.testing.fuzz.bitcode_mutations import MAGIC, read_bits

FIXED, VBR, ARRAY, CHAR6, BLOB = 1, 2, 3, 4, 5
BLOCKINFO = 0


@dataclass(frozen=True)
class Item:
    """One entry of a block as the walker read it: bits [start, end) of the file. A sub-block's bits are its
    ENTER_SUBBLOCK header (abbreviation id, block id, width: its padding and length word follow), its contents
    `items` and its abbreviation `width`; a record's or abbreviation's bits are all of it, padding included,
    and `aligned` names the positions where a blob's padding to 32 bits starts (the record keeps its meaning
    only where that padding is made again). `block_id`: a sub-block's own, else the enclosing block's."""

    start: int
    end: int
    kind: str  # "block" | "abbreviation" | "record"
    block_id: int
    width: int = 0
    items: tuple[Item, ...] = ()
    aligned: tuple[int, ...] = ()
    code: int = -1  # a record's code


@dataclass(frozen=True)
class Field:
    """One value of a record: bits [position, position + bits) of the file; `width` is the fixed width, or
    the VBR chunk width (`vbr` True), whose `bits // width` chunks the edit keeps."""

    position: int
    bits: int
    width: int
    vbr: bool
    value: int


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.position, self.fields = data, 0, []
        self.aligned: list[int] = []  # every position align() was called at

    def fixed(self, width: int, keep: bool = True) -> int:
        if width == 0:
            return 0
        value = read_bits(self.data, self.position, width)
        if keep:
            self.fields.append(Field(self.position, width, width, False, value))
        self.position += width
        return value

    def vbr(self, width: int, keep: bool = True) -> int:
        start, value, shift = self.position, 0, 0
        while True:
            chunk = read_bits(self.data, self.position, width)
            self.position += width
            value |= (chunk & ((1 << (width - 1)) - 1)) << shift
            shift += width - 1
            if not chunk >> (width - 1):
                break
            if shift > 70:
                raise ValueError("VBR too long")
        if keep:
            self.fields.append(Field(start, self.position - start, width, True, value))
        return value

    def align(self) -> None:
        self.aligned.append(self.position)
        self.position = (self.position + 31) // 32 * 32


def _read_abbreviation(reader: _Reader) -> list[tuple[int, int]]:
    """DEFINE_ABBREV's operands: (encoding, value) pairs, encoding 0 for a literal."""
    operands = []
    for _ in range(reader.vbr(5, keep=False)):
        if reader.fixed(1, keep=False):
            operands.append((0, reader.vbr(8, keep=False)))
            continue
        encoding = reader.fixed(3, keep=False)
        value = reader.vbr(5, keep=False) if encoding in (FIXED, VBR) else 0
        if encoding not in (FIXED, VBR, ARRAY, CHAR6, BLOB):
            raise ValueError(f"unknown abbreviation encoding {encoding}")
        operands.append((encoding, value))
    return operands


def _read_scalar(reader: _Reader, encoding: int, value: int) -> int:
    if encoding == 0:
        return value
    if encoding == FIXED:
        return reader.fixed(value)
    if encoding == VBR:
        return reader.vbr(value)
    if encoding == CHAR6:
        return reader.fixed(6)
    raise ValueError(f"encoding {encoding} is not a scalar")


def _read_abbreviated(reader: _Reader, operands: list[tuple[int, int]]) -> list[int]:
    values, index = [], 0
    while index < len(operands):
        encoding, value = operands[index]
        if encoding == ARRAY:
            element = operands[index + 1]
            count = reader.vbr(6)
            values += [_read_scalar(reader, *element) for _ in range(count)]
            index += 2
            continue
        if encoding == BLOB:
            length = reader.vbr(6)
            reader.align()
            reader.position += 8 * length
            reader.align()
        else:
            values.append(_read_scalar(reader, encoding, value))
        index += 1
    return values


def _read_block(reader: _Reader, width: int, block_id: int, info: dict[int, list]) -> list[Item]:
    """The block's contents after its header, up to its END_BLOCK: its entries."""
    abbreviations = list(info.get(block_id, []))
    current = None  # BLOCKINFO's SETBID target
    items = []
    while True:
        start, aligned_before = reader.position, len(reader.aligned)
        code = reader.fixed(width, keep=False)
        if code == 0:  # END_BLOCK
            reader.align()
            return items
        if code == 1:  # ENTER_SUBBLOCK
            items.append(_enter_block(reader, start, info))
            continue
        kind, record = "record", -1
        if code == 2:  # DEFINE_ABBREV
            kind = "abbreviation"
            operands = _read_abbreviation(reader)
            if block_id == BLOCKINFO:
                if current is None:
                    raise ValueError("abbreviation in BLOCKINFO before SETBID")
                info.setdefault(current, []).append(operands)
            else:
                abbreviations.append(operands)
        elif code == 3:  # UNABBREV_RECORD
            record = reader.vbr(6)
            values = [reader.vbr(6) for _ in range(reader.vbr(6, keep=False))]
            if block_id == BLOCKINFO and record == 1 and values:
                current = values[0]
        else:
            if code - 4 >= len(abbreviations):
                raise ValueError(f"abbreviation id {code} undefined")
            values = _read_abbreviated(reader, abbreviations[code - 4])
            record = values[0] if values else -1
            if block_id == BLOCKINFO and values and values[0] == 1 and len(values) > 1:
                current = values[1]
        aligned = tuple(reader.aligned[aligned_before:])
        items.append(Item(start, reader.position, kind, block_id, aligned=aligned, code=record))


def _enter_block(reader: _Reader, start: int, info: dict[int, list]) -> Item:
    """The block whose ENTER_SUBBLOCK id was read at `start`: its block id, abbreviation width and length
    word, then its items up to its END_BLOCK."""
    block_id = reader.vbr(8, keep=False)
    width = reader.vbr(4, keep=False)
    header_end = reader.position
    reader.align()
    reader.fixed(32, keep=False)
    items = _read_block(reader, width, block_id, info)
    return Item(start, header_end, "block", block_id, width, tuple(items))


@functools.cache
def _walk(data: bytes) -> tuple[_Reader, tuple[Item, ...], int] | None:
    """The walk of a raw bitcode file: its reader (fields and all), its top-level blocks, and the bit where
    they end (any bytes after them are no block); None if it is not raw bitcode or a block does not read to
    its end (the walker is for valid modules, and for mutated ones whose framing held)."""
    if not data.startswith(MAGIC):
        return None
    reader = _Reader(data)
    reader.position = len(MAGIC) * 8
    info: dict[int, list] = {}
    blocks = []
    end = reader.position
    try:
        while reader.position + 32 <= len(data) * 8:
            start = reader.position
            if reader.fixed(2, keep=False) != 1:
                break
            blocks.append(_enter_block(reader, start, info))
            end = reader.position
    except (ValueError, IndexError):
        return None
    return reader, tuple(blocks), end


def record_fields(data: bytes) -> tuple[Field, ...]:
    """Every field of every record of a raw bitcode file (none if it is not one or its stream ends
    early: the walker is for valid seed modules)."""
    walk = _walk(data)
    return () if walk is None else tuple(walk[0].fields)


def top_level_items(data: bytes) -> tuple[tuple[Item, ...], int] | None:
    """The top-level blocks of a raw bitcode file with their contents (`Item`s), and the bit where they end;
    None where `record_fields` finds none."""
    walk = _walk(data)
    return None if walk is None else walk[1:]


def _new_value(rng: random.Random, field: Field, capacity: int, neighbours: tuple[Field, ...]) -> int:
    choice = rng.randrange(7)
    if choice == 0:
        value = field.value + rng.choice((-1, 1, -2, 2))
    elif choice == 1:
        value = rng.choice((0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 1 << 31, capacity - 1))
    elif choice == 2:
        value = capacity - 1 - rng.randrange(min(capacity, 4))
    elif choice == 3 and neighbours:
        value = rng.choice(neighbours).value
    elif choice == 4:
        value = field.value ^ (1 << rng.randrange(capacity.bit_length() - 1 or 1))
    elif choice == 5:
        value = field.value * rng.choice((2, 16, 1 << 10))
    else:
        value = rng.randrange(capacity)
    return value % capacity


def write_field(data: bytes, field: Field, value: int) -> bytes:
    """`data` with `field` holding `value` (taken modulo what its bits can hold), in the same bits."""
    if field.vbr:
        payload, chunks, encoded = field.width - 1, field.bits // field.width, 0
        value %= 1 << (payload * chunks)
        for chunk in range(chunks):
            piece = (value >> (payload * chunk)) & ((1 << payload) - 1)
            if chunk < chunks - 1:
                piece |= 1 << payload
            encoded |= piece << (field.width * chunk)
    else:
        encoded = value % (1 << field.bits)
    first, last = field.position // 8, (field.position + field.bits + 7) // 8
    shift = field.position % 8
    window = int.from_bytes(data[first:last], "little")
    mask = ((1 << field.bits) - 1) << shift
    window = (window & ~mask) | (encoded << shift)
    return data[:first] + window.to_bytes(last - first, "little") + data[last:]


def edit_fields(rng: random.Random, data: bytes, edits: int = 1) -> bytes:
    """`data` (a valid module: the fields are found on it) with `edits` record fields rewritten."""
    fields = record_fields(data)
    if not fields:
        return data
    for _ in range(edits):
        at = rng.randrange(len(fields))
        field = fields[at]
        payload = field.width - 1 if field.vbr else field.width
        capacity = 1 << (payload * (field.bits // field.width) if field.vbr else payload)
        neighbours = fields[max(0, at - 8) : at + 8]
        data = write_field(data, field, _new_value(rng, field, capacity, neighbours))
    return data
