"""The judge's own torch IPC reference counters (issue 24, item 3): read and set to 0 where torch keeps
them, in files laid out as torch's RefcountedMapAllocator lays them out, and the idle pools that are
dropped only with their counter set to 0."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
import torch

from cuda_agent_mcp.judge import staging
from cuda_agent_mcp.wire.ipc_memory import COUNTER_HEADER_BYTES, CounterSlot
from cuda_agent_mcp.wire.refs import CudaIpcPayload, TensorRef


def _counter_file(directory: Path, values: dict[int, int], name: str = "torch_4242_17_0") -> Path:
    """A counter file as torch makes one: the allocator's header, then 10000 int64 slots."""
    data = bytearray(COUNTER_HEADER_BYTES + 8 * 10000)
    struct.pack_into("<i", data, 0, 1)  # the allocator's own refcount, which must never be taken for a slot
    for slot, value in values.items():
        struct.pack_into("<q", data, COUNTER_HEADER_BYTES + 8 * slot, value)
    path = directory / name
    path.write_bytes(bytes(data))
    return path


def _slot_value(path: Path, slot: int) -> int:
    return struct.unpack_from("<q", path.read_bytes(), COUNTER_HEADER_BYTES + 8 * slot)[0]


def test_a_fresh_shares_slot_is_found_read_and_released(tmp_path: Path) -> None:
    path = _counter_file(tmp_path, {0: -2, 3: 1})
    slot = CounterSlot.of_new_share(b"/torch_4242_17_0", 3, shm=tmp_path)
    assert slot is not None and slot.read() == 1
    assert slot.release()
    assert slot.read() == 0 and _slot_value(path, 3) == 0
    assert _slot_value(path, 0) == -2  # its neighbour untouched
    assert struct.unpack_from("<i", path.read_bytes(), 0)[0] == 1  # and the header


def test_a_file_that_does_not_read_as_a_fresh_share_is_never_written(tmp_path: Path) -> None:
    """Where torch's layout is not what this code knows (slot not at 1 right after a share), the judge
    writes nothing: it keeps the pool instead."""
    path = _counter_file(tmp_path, {3: 0})
    before = path.read_bytes()
    assert CounterSlot.of_new_share(b"/torch_4242_17_0", 3, shm=tmp_path) is None
    assert CounterSlot.of_new_share(b"/torch_4242_17_9", 3, shm=tmp_path) is None  # no such file
    assert path.read_bytes() == before


def test_a_counter_path_that_became_a_symlink_is_neither_read_nor_written(tmp_path: Path) -> None:
    target = _counter_file(tmp_path, {3: 1}, name="elsewhere")
    os.symlink(target, tmp_path / "torch_4242_17_0")
    slot = CounterSlot(tmp_path / "torch_4242_17_0", 3)
    assert slot.read() is None
    assert not slot.release()
    assert _slot_value(target, 3) == 1


def _pool(nbytes: int, counter: CounterSlot | None) -> staging._Pool:
    payload = CudaIpcPayload(
        device=0,
        handle="aA==",
        storage_size_bytes=nbytes,
        storage_offset_bytes=0,
        ref_counter_handle="aA==",
        ref_counter_offset=0,
        event_sync_required=False,
    )
    ref = TensorRef(dtype="uint8", shape=[nbytes], stride=[1], storage_offset=0, payload=payload)
    buffer = torch.empty(nbytes, dtype=torch.uint8)
    return staging._Pool(slot_bytes=nbytes, regions=1, buffer=buffer, pool=None, ref=ref, counter=counter)


@pytest.fixture
def idle(monkeypatch: pytest.MonkeyPatch) -> list[staging._Pool]:
    pools: list[staging._Pool] = []
    monkeypatch.setattr(staging, "_IDLE", pools)
    monkeypatch.setattr(staging, "MAX_IDLE_POOL_BYTES", 1000)
    return pools


def test_idle_pools_beyond_the_budget_are_dropped_largest_first_with_their_counters_at_0(
    tmp_path: Path, idle: list[staging._Pool]
) -> None:
    path = _counter_file(tmp_path, {0: 1, 1: 1, 2: 1})
    small, large, middle = (_pool(n, CounterSlot(path, slot)) for slot, n in enumerate([300, 900, 600]))
    idle += [small, large, middle]
    staging._trim_idle()
    assert idle == [small, middle]  # 900 dropped: 900 bytes kept, under the budget of 1000
    assert [_slot_value(path, slot) for slot in range(3)] == [1, 0, 1]


def test_a_pool_whose_counter_cannot_be_set_is_kept_rather_than_left_allocated_for_good(
    tmp_path: Path, idle: list[staging._Pool]
) -> None:
    path = _counter_file(tmp_path, {1: 1})
    unknown = _pool(900, None)
    gone = _pool(800, CounterSlot(tmp_path / "torch_4242_17_5", 0))  # its file removed
    known = _pool(700, CounterSlot(path, 1))
    idle += [unknown, gone, known]
    staging._trim_idle()
    assert idle == [unknown, gone]
    assert _slot_value(path, 1) == 0
    assert staging.idle_pool_bytes() == 1700  # what is kept is still counted as kept on purpose
