"""Just enough of ELF to compare two object files: code bytes and section names, without importing LLVM.

optcc measures both objects it chooses between on every compile; llvmlite would cost its import there, and
the section header table is all that is needed. `text_size` counts what `compiler.cost.text_size` counts
(the sections LLVM calls text: flag SHF_EXECINSTR), so the two agree on every object.
"""

from __future__ import annotations

import struct
from collections import namedtuple

SHF_EXECINSTR = 0x4
_SHN_XINDEX = 0xFFFF


class NotElf(ValueError):
    """The bytes are not an ELF object file this module can read."""


Section = namedtuple("Section", "name flags size")


def sections(data: bytes) -> list[Section]:
    """Every section of an ELF file (32 or 64 bit, either byte order)."""
    if data[:4] != b"\x7fELF":
        raise NotElf("not an ELF file")
    wide = {1: False, 2: True}.get(data[4])
    order = {1: "<", 2: ">"}.get(data[5])
    if wide is None or order is None:
        raise NotElf("unknown ELF class or byte order")
    try:
        if wide:
            table, entry_size, count, names_index = struct.unpack_from(order + "Q10xHHH", data, 0x28)
            layout = order + "I4xQ8xQQI"  # sh_name, sh_flags, sh_offset, sh_size, sh_link
        else:
            table, entry_size, count, names_index = struct.unpack_from(order + "I10xHHH", data, 0x20)
            layout = order + "I4xI4xIII"
        headers = []
        first = struct.unpack_from(layout, data, table) if table else None
        if first is not None and count == 0:  # over 0xff00 sections: the count is in section 0
            count = first[3]
        if first is not None and names_index == _SHN_XINDEX:
            names_index = first[4]
        for index in range(count):
            headers.append(struct.unpack_from(layout, data, table + index * entry_size))
        strings = headers[names_index][2] if headers else 0
        return [
            Section(
                data[strings + name : data.index(b"\0", strings + name)].decode(errors="replace"), flags, size
            )
            for name, flags, _, size, _ in headers
        ]
    except (struct.error, IndexError, ValueError):
        raise NotElf("truncated or malformed section header table") from None


def text_size(data: bytes) -> int:
    """Bytes in the object's code sections (`.text`, `.text.*`, the comdat code of C++ templates)."""
    return code_bytes(sections(data))


def code_bytes(object_sections: list[Section]) -> int:
    """Bytes in the code sections among `object_sections` (`text_size` of sections already read)."""
    return sum(section.size for section in object_sections if section.flags & SHF_EXECINSTR)
