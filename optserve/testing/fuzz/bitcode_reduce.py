"""Smaller bitcode that still reads the same way: whole blocks and records left out of a bitstream, the rest
written again with every block's length word and padding made right.

Deleting bytes from bitcode shifts every later bit, so LLVM's reader stops at the next abbreviation id with
"invalid" and the crash under test is gone: byte-level delta debugging barely shrinks a bitcode crasher.
Here the walker of bitcode_records.py reads the file into its blocks and their entries; `without(dropped)`
writes the stream again with those entries left out, copying every kept entry's bits as they were (a
record means the same in any position: its abbreviation ids are its block's, and its blob padding is made
again), and each block's END_BLOCK, padding and length word new. Abbreviation definitions and the BLOCKINFO
block are kept (leaving one out would renumber the abbreviations after it). First of all it tries to leave out
the module's function offsets (VSTOFFSET and the module-level symbol table): while they stay, leaving out
anything before a function block points LLVM at the wrong place, and the crash under test is gone.
"""

from __future__ import annotations

from collections.abc import Callable

from optserve.testing.fuzz.bitcode_mutations import MAGIC, read_bits
from optserve.testing.fuzz.bitcode_records import BLOCKINFO, Item, top_level_items
from optserve.testing.fuzz.delta import drop_chunks

MODULE_BLOCK, VALUE_SYMTAB, VSTOFFSET = (
    8,
    14,
    13,
)  # LLVM's MODULE_BLOCK_ID, VALUE_SYMTAB_BLOCK_ID, MODULE_CODE_VSTOFFSET


class _Writer:
    """A bitstream being written, LSB first, as one integer."""

    def __init__(self) -> None:
        self.value, self.bits = 0, 0

    def write(self, value: int, width: int) -> None:
        self.value |= (value & ((1 << width) - 1)) << self.bits
        self.bits += width

    def copy(self, data: bytes, start: int, end: int) -> None:
        while start < end:
            width = min(64, end - start)
            self.write(read_bits(data, start, width), width)
            start += width

    def align(self) -> None:
        self.bits = (self.bits + 31) // 32 * 32

    def to_bytes(self) -> bytes:
        return self.value.to_bytes((self.bits + 7) // 8, "little")


class Bitstream:
    """A raw bitcode file read into its blocks and entries, to be written again without some of them."""

    def __init__(self, data: bytes, blocks: tuple[Item, ...], end: int):
        self.data, self.blocks, self.end = data, blocks, end

    @classmethod
    def read(cls, data: bytes) -> Bitstream | None:
        """None where the walker cannot read `data` to the end of its blocks."""
        walked = top_level_items(data)
        return None if walked is None else cls(data, *walked)

    def entries(self, kind: str) -> list[Item]:
        """Entries that may be left out, of `kind` ("block" or "record"), outer before inner."""
        found, stack = [], list(reversed(self.blocks))
        while stack:
            item = stack.pop()
            if item.kind == kind and item.block_id != BLOCKINFO:
                found.append(item)
            if item.kind == "block" and item.block_id != BLOCKINFO:
                stack.extend(reversed(item.items))
        return found

    def without(self, dropped: set[int]) -> bytes:
        """The file without the entries whose `id()` is in `dropped`; bytes after the last block kept."""
        writer = _Writer()
        writer.copy(self.data, 0, len(MAGIC) * 8)
        self._write(writer, self.blocks, dropped)
        tail = self.data[self.end // 8 :] if self.end % 8 == 0 else b""
        return writer.to_bytes() + tail

    def _write(self, writer: _Writer, items: tuple[Item, ...], dropped: set[int]) -> None:
        for item in items:
            if id(item) in dropped:
                continue
            if item.kind == "block":
                writer.copy(self.data, item.start, item.end)  # ENTER_SUBBLOCK, block id, width
                writer.align()
                length_at = writer.bits
                writer.write(0, 32)
                self._write(writer, item.items, dropped)
                writer.write(0, item.width)  # END_BLOCK
                writer.align()
                writer.value |= ((writer.bits - length_at - 32) // 32) << length_at
                continue
            position = item.start
            for aligned in item.aligned:  # a blob's padding, made again where the record now sits
                writer.copy(self.data, position, aligned)
                writer.align()
                position = (aligned + 31) // 32 * 32
            writer.copy(self.data, position, item.end)


def reduce(data: bytes, same: Callable[[bytes], bool], stop: Callable[[], bool] = lambda: False) -> bytes:
    """`data` with as many blocks, then records, left out as `same` allows (it says whether a candidate still
    reads the same way) before `stop()`; `data` itself where it is no bitcode the walker reads."""
    stream = Bitstream.read(data)
    if stream is None:
        return data
    dropped: set[int] = set()
    offsets = _function_offsets(stream)
    if offsets and same(stream.without(offsets)):
        dropped |= offsets
    for kind in ("block", "record"):
        inside_dropped = {id(inner) for block in stream.entries("block") if id(block) in dropped
                          for inner in _inside(block)}  # fmt: skip
        units = [item for item in stream.entries(kind) if id(item) not in dropped | inside_dropped]
        dropped |= _left_out(stream, units, dropped, same, stop)
    return stream.without(dropped)


def _function_offsets(stream: Bitstream) -> set[int]:
    """Ids of the module's VSTOFFSET record and its value symbol table: LLVM finds function blocks at the
    offsets these hold, which leaving out anything before a function block would make wrong; without both,
    it reads the function blocks in order."""
    found = set()
    for module in (block for block in stream.blocks if block.block_id == MODULE_BLOCK):
        for item in module.items:
            if (item.kind, item.code) == ("record", VSTOFFSET) or (item.kind, item.block_id) == (
                "block",
                VALUE_SYMTAB,
            ):
                found.add(id(item))
    return found


def _left_out(stream: Bitstream, units: list[Item], dropped: set[int], same, stop) -> set[int]:
    """Ids of the `units` that can be left out beside `dropped`, as `same` finds."""
    every = {id(item) for item in units}

    def keeps(kept: list[Item]) -> bool:
        return same(stream.without(dropped | (every - {id(item) for item in kept})))

    return every - {id(item) for item in drop_chunks(units, keeps, stop=stop)}


def _inside(block: Item) -> list[Item]:
    found, stack = [], list(block.items)
    while stack:
        item = stack.pop()
        found.append(item)
        stack.extend(item.items)
    return found
