"""What a cubin (an NVIDIA ELF) says about its kernels, read on the trusted side without a driver.

The `.nv.info` sections hold attribute records: per kernel (`.nv.info.<kernel>`) its parameters
(EIATTR_KPARAM_INFO), and in the shared `.nv.info` each function's register count (EIATTR_REGCOUNT,
keyed by the function's symbol index, which its `.text.<kernel>` section names in `sh_info`; for sm_80
and older there is no such record: the count is sh_info's top byte). A cubin may come from a process
that ran candidate code (a Triton build), so a malformed one yields nothing rather than an exception.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 2, 3, 4
_EIATTR_KPARAM_INFO = 0x17
_EIATTR_REGCOUNT = 0x2F


@dataclass(frozen=True)
class _Section:
    name: str
    offset: int
    size: int
    info: int


@dataclass(frozen=True)
class _Record:
    attribute: int
    value: bytes


def _sections(cubin: bytes) -> list[_Section]:
    section_offset = struct.unpack_from("<Q", cubin, 0x28)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQII", cubin, section_offset + i * entry_size) for i in range(count)]
    names_at = headers[names_index][4]
    sections = []
    for name_offset, _type, _flags, _address, offset, size, _link, info in headers:
        end = cubin.index(b"\0", names_at + name_offset)
        sections.append(_Section(cubin[names_at + name_offset : end].decode(), offset, size, info))
    return sections


def _records(cubin: bytes, section: _Section) -> list[_Record]:
    """The section's attribute records with a value (SVAL); the short forms are skipped."""
    records = []
    position = section.offset
    while position + 2 <= section.offset + section.size:
        form, attribute = cubin[position], cubin[position + 1]
        position += 2
        if form == _EIFMT_SVAL:
            length = struct.unpack_from("<H", cubin, position)[0]
            records.append(_Record(attribute, cubin[position + 2 : position + 2 + length]))
            position += 2 + length
        elif form == _EIFMT_HVAL:
            position += 2
        elif form == _EIFMT_BVAL:
            position += 1
    return records


def parameter_sizes(cubin: bytes) -> dict[str, list[int]]:
    """Each kernel's parameter sizes in bytes, in order (EIATTR_KPARAM_INFO records). The CuPy launcher
    checks arguments against them without asking the driver (a driver call that fails on purpose is an
    API error to compute-sanitizer, measured on the H200: the sanitizer gate rejected an honest kernel
    for it)."""
    try:
        found: dict[str, list[int]] = {}
        for section in _sections(cubin):
            if not section.name.startswith(".nv.info."):
                continue
            sizes: dict[int, int] = {}
            for record in _records(cubin, section):
                if record.attribute == _EIATTR_KPARAM_INFO and len(record.value) >= 12:
                    _index, ordinal, _offset, flags = struct.unpack_from("<IHHI", record.value)
                    sizes[ordinal] = (flags >> 18) & 0x3FFF
            found[section.name.removeprefix(".nv.info.")] = [sizes[i] for i in sorted(sizes)]
        return found
    except (struct.error, ValueError, IndexError, UnicodeDecodeError, KeyError):
        return {}


def register_counts(cubin: bytes) -> dict[str, int]:
    """Registers per thread of each function in the cubin, by name: its EIATTR_REGCOUNT record, or where
    there is none (cubins for sm_80 and older, measured) the top byte of its `.text.<kernel>` sh_info,
    whose low 24 bits are the symbol index."""
    try:
        sections = _sections(cubin)
        by_symbol: dict[int, int] = {}
        for section in sections:
            if section.name == ".nv.info":
                for record in _records(cubin, section):
                    if record.attribute == _EIATTR_REGCOUNT and len(record.value) >= 8:
                        symbol, count = struct.unpack_from("<II", record.value)
                        by_symbol[symbol] = count
        counts = {}
        for s in sections:
            count = by_symbol.get(s.info & 0xFFFFFF, s.info >> 24)
            if s.name.startswith(".text.") and count:
                counts[s.name.removeprefix(".text.")] = count
        return counts
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return {}
