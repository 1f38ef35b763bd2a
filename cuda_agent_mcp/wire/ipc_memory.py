"""What the CUDA driver and torch's IPC bookkeeping say about shared memory, read by the process that owns
or maps it rather than taken from the other side's message.

- `allocation_range`: the driver's extent of the allocation a device pointer lies in
  (`cuMemGetAddressRange`). A receiver that mapped a sender's IPC handle checks the offset and size the
  sender claims against it before reading anything: on the H200 the range of a mapped handle is the
  exporter's whole allocator segment (a 12 MiB tensor mapped as its 14 MiB segment), starting at the
  mapping's base.
- `CounterSlot`: the int64 in torch's reference-counter file that a sender's shared block is freed by.
  Torch sets it to 1 when a block is shared and every receiver decrements it once when it lets go; a
  dropped block is freed only when the slot reads exactly 0 (it is read as unsigned, so a block mapped
  by two receivers, at -1, or by none, at 1, stays allocated for good: measured on the H200, issue 24).
  The owner of a block that no live process maps can set its slot to 0 itself.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# torch maps a counter file with RefcountedMapAllocator, whose own header (TH_ALLOC_ALIGNMENT bytes)
# comes first; slot i follows at HEADER + 8 * i. Checked on each new share (`CounterSlot.of_new_share`).
COUNTER_HEADER_BYTES = 64
_INT64 = struct.Struct("<q")


@cache
def _address_range_query() -> Any:
    """The driver's `cuMemGetAddressRange_v2`, typed once, or None where libcuda cannot be loaded."""
    try:
        query = ctypes.CDLL("libcuda.so.1").cuMemGetAddressRange_v2
    except (OSError, AttributeError):
        return None
    query.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
    query.restype = ctypes.c_int
    return query


def allocation_range(pointer: int) -> tuple[int, int] | None:
    """(base, size) of the device allocation holding `pointer` in the calling thread's context, or None
    where the driver knows no allocation there (or cannot be asked)."""
    query = _address_range_query()
    if query is None:
        return None
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    if query(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer)) != 0:
        return None
    return base.value, size.value


@dataclass(frozen=True)
class CounterSlot:
    """One block's reference counter in a counter file of this process's own torch."""

    path: Path
    slot: int

    @classmethod
    def of_new_share(cls, counter_name: bytes, slot: int, shm: Path = Path("/dev/shm")) -> CounterSlot | None:
        """The slot of a block this process has just shared, or None where the file does not read as
        torch's layout is known to be (a fresh share's slot holds 1): then nobody writes to it."""
        found = cls(shm / counter_name.decode("ascii").lstrip("/"), slot)
        return found if found.read() == 1 else None

    def read(self) -> int | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.pread(fd, _INT64.size, COUNTER_HEADER_BYTES + _INT64.size * self.slot)
        finally:
            os.close(fd)
        return _INT64.unpack(data)[0] if len(data) == _INT64.size else None

    def release(self) -> bool:
        """Set the count to 0, so torch frees the block once it is dropped: only for a block that no
        live process maps any more. False where the file is gone."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return (
                os.pwrite(fd, _INT64.pack(0), COUNTER_HEADER_BYTES + _INT64.size * self.slot) == _INT64.size
            )
        finally:
            os.close(fd)
