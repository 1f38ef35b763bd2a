"""The judge trusts no number in a worker's reply (issue 24, item 5), on the CPU.

A CPU output arrives as a file the worker can still write: the judge reads it into its own memory and
never maps it, so a file swapped, shortened or replaced under it is a refused output, never a SIGBUS in
the judge. A CUDA output's fields that torch's IPC rebuild would use unchecked (the reference counter it
writes to when it lets go, the handles it decodes) are checked before torch sees them.
"""

from __future__ import annotations

import base64
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from cuda_agent_mcp.wire import transport
from cuda_agent_mcp.wire.refs import CudaIpcPayload, ShmPayload, TensorRef, release_shm, shm_dir, shm_tag
from cuda_agent_mcp.wire.transport import REF_COUNTER_SLOTS, MappingFailed, TransportError, receive, share

LIMIT = 1 << 20


@pytest.fixture
def sent() -> Iterator[TensorRef]:
    ref = share(torch.arange(12, dtype=torch.float32).reshape(3, 4))
    yield ref
    release_shm(ref)


def _path(ref: TensorRef) -> Any:
    assert isinstance(ref.payload, ShmPayload)
    return shm_dir() / ref.payload.name


def test_a_cpu_output_is_copied_and_later_writes_to_its_file_do_not_reach_the_copy(sent: TensorRef) -> None:
    copy = receive(sent, max_bytes=LIMIT)
    assert torch.equal(copy, torch.arange(12, dtype=torch.float32).reshape(3, 4))
    _path(sent).write_bytes(b"\xff" * 48)
    assert torch.equal(copy, torch.arange(12, dtype=torch.float32).reshape(3, 4))


def test_an_empty_and_a_0_dim_output_arrive(tmp_path) -> None:
    for tensor in (torch.empty(0, 3), torch.tensor(2.5), torch.ones(1, 4)[:, :]):
        ref = share(tensor)
        try:
            assert torch.equal(receive(ref, max_bytes=LIMIT), tensor)
        finally:
            release_shm(ref)


@pytest.mark.parametrize(
    "change",
    [
        {"stride": [1, 3]},  # a transposed view of the file
        {"storage_offset": 1},
        {"shape": [2, 4]},  # the file holds more than the tensor
        {"shape": [4, 4], "stride": [4, 1]},  # the tensor claims more than the file
        {"dtype": "complex64"},
        {"stride": [4]},
    ],
    ids=["strided", "offset", "file larger than claimed", "file smaller than claimed", "dtype", "rank"],
)
def test_a_cpu_output_not_sent_dense_is_refused(sent: TensorRef, change: dict[str, Any]) -> None:
    with pytest.raises(TransportError):
        receive(sent.model_copy(update=change), max_bytes=LIMIT)


def test_a_cpu_output_over_the_limit_is_refused_before_anything_is_allocated(sent: TensorRef) -> None:
    huge = sent.model_copy(
        update={
            "shape": [1 << 40],
            "stride": [1],
            "payload": ShmPayload(name=sent.payload.name, storage_size_bytes=4 << 40),  # type: ignore[union-attr]
        }
    )
    with pytest.raises(TransportError, match="exceeds the limit"):
        receive(huge, max_bytes=LIMIT)


def _replace_file(ref: TensorRef, make: Any) -> None:
    path = _path(ref)
    path.unlink()
    make(path)


@pytest.mark.parametrize(
    "make",
    [
        lambda path: os.symlink(shm_dir() / "some-file-of-the-judge", path),
        lambda path: os.mkfifo(path),
        lambda path: path.mkdir(),
        lambda path: path.write_bytes(b"\0" * 8),
    ],
    ids=["symlink", "fifo", "directory", "short file"],
)
def test_a_file_replaced_by_something_else_is_refused_at_once(sent: TensorRef, make: Any) -> None:
    target = shm_dir() / "some-file-of-the-judge"
    target.write_bytes(b"\1" * 48)
    try:
        _replace_file(sent, make)
        started = time.monotonic()
        with pytest.raises(TransportError):
            receive(sent, max_bytes=LIMIT)
        assert time.monotonic() - started < 5  # a FIFO does not block the reader
    finally:
        target.unlink(missing_ok=True)
        if _path(sent).is_dir():
            _path(sent).rmdir()


def test_a_file_shortened_again_and_again_while_it_is_read_never_crashes_the_reader() -> None:
    """The attack a mapped file allows: the sender truncates its output while the judge reads it. Mapped,
    that is a SIGBUS that kills the judge (and this test process); read, it is a refused or whole copy."""
    tensor = torch.arange(1 << 20, dtype=torch.float32)  # 4 MiB
    ref = share(tensor)
    path = _path(ref)
    stop = threading.Event()

    def shorten() -> None:
        while not stop.is_set():
            os.truncate(path, 4096)
            os.truncate(path, tensor.numel() * 4)

    sabotage = threading.Thread(target=shorten, daemon=True)
    sabotage.start()
    outcomes = {"copied": 0, "refused": 0}
    try:
        for _ in range(200):
            try:
                copy = receive(ref, max_bytes=8 << 20)
                assert copy.shape == tensor.shape
                outcomes["copied"] += 1
            except TransportError:
                outcomes["refused"] += 1
    finally:
        stop.set()
        sabotage.join()
        release_shm(ref)
    assert sum(outcomes.values()) == 200


# -- CUDA outputs: the fields torch's rebuild would use unchecked ---------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _cuda_ref(**fields: Any) -> TensorRef:
    payload = {
        "device": 0,
        "handle": _b64(b"h" * 64),
        "storage_size_bytes": 64,
        "storage_offset_bytes": 0,
        "ref_counter_handle": _b64(f"/torch_{os.getpid() + 1}_3681618479_0".encode()),
        "ref_counter_offset": 7,
        "event_handle": _b64(b"e" * 64),
        "event_sync_required": True,
    } | fields
    return TensorRef(
        dtype="float32", shape=[4], stride=[1], storage_offset=0, payload=CudaIpcPayload(**payload)
    )


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """torch's rebuild, recorded instead of run (no GPU here): what reaches it is what the checks let by."""
    calls: list[tuple[Any, ...]] = []

    def rebuild(*args: Any) -> Any:
        calls.append(args)
        raise RuntimeError("no CUDA here")

    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", rebuild, raising=False)
    return calls


def test_a_well_formed_cuda_output_reaches_torch_with_the_fields_it_was_sent_but_not_its_event(
    rebuilds: list,
) -> None:
    with pytest.raises(MappingFailed):
        receive(_cuda_ref(), max_bytes=LIMIT, sender_pid=os.getpid() + 1)
    [(device, handle, size, offset, counter, counter_offset, event, sync)] = rebuilds
    assert (device, handle, size, offset) == (0, b"h" * 64, 64, 0)
    assert (counter, counter_offset) == (f"/torch_{os.getpid() + 1}_3681618479_0".encode(), 7)
    # The worker's event is never opened by the judge (the worker synchronises before it replies).
    assert (event, sync) == (bytes(64), False)


def test_a_counter_of_another_process_than_the_sender_is_refused(rebuilds: list) -> None:
    with pytest.raises(TransportError, match="not the sender's own"):
        receive(_cuda_ref(), max_bytes=LIMIT, sender_pid=os.getpid() + 2)
    assert rebuilds == []


class _MappedStorage:
    def __init__(self, pointer: int) -> None:
        self.pointer = pointer

    def data_ptr(self) -> int:
        return self.pointer


@pytest.mark.parametrize(
    ("extent", "fields", "refused"),
    [
        ((0x7000_0000, 1 << 20), {}, None),
        (
            (0x7000_0000, 1 << 20),
            {"storage_offset_bytes": 4096, "storage_size_bytes": (1 << 20) - 4096},
            None,
        ),
        ((0x7000_0000, 1 << 20), {"storage_size_bytes": (1 << 20) + 1}, "reaches outside"),
        ((0x7000_0000, 1 << 20), {"storage_offset_bytes": 1 << 20}, "reaches outside"),
        (
            (0x6FFF_0000, 1 << 30),
            {"storage_offset_bytes": 512},
            "reaches outside",
        ),  # inside another allocation
        (None, {}, "knows no allocation"),
    ],
    ids=[
        "whole",
        "a slice",
        "size past the end",
        "offset past the end",
        "not the mapping's base",
        "unmapped",
    ],
)
def test_a_cuda_output_is_checked_against_what_the_driver_mapped_before_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
    extent: tuple[int, int] | None,
    fields: dict[str, Any],
    refused: str | None,
) -> None:
    """The offset and size a worker claims, against the driver's extent of the mapping (its base is
    where torch put the handle's memory: the storage's pointer less the claimed offset)."""
    ref = _cuda_ref(**fields)
    payload = ref.payload
    assert isinstance(payload, CudaIpcPayload)
    storage = _MappedStorage(0x7000_0000 + payload.storage_offset_bytes)
    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", lambda *args: storage, raising=False)
    monkeypatch.setattr(transport, "allocation_range", lambda pointer: extent)
    if refused is None:
        transport._check_mapping(storage, payload)
        return
    with pytest.raises(TransportError, match=refused) as caught:
        receive(ref, max_bytes=LIMIT)
    assert (type(caught.value) is MappingFailed) == (
        extent is None
    )  # only the driver's silence is the machine's


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ref_counter_offset": REF_COUNTER_SLOTS}, "past the counter file"),
        ({"ref_counter_offset": 1 << 50}, "past the counter file"),
        ({"ref_counter_handle": _b64(b"/../../proc/self/mem")}, "not one torch makes"),
        ({"ref_counter_handle": _b64(b"/cuda-agent-judge-inputs")}, "not one torch makes"),
        ({"ref_counter_handle": _b64(b"/torch_1_2")}, "not one torch makes"),
        ({"ref_counter_handle": _b64("/torch_١٢_3_4".encode())}, "not one torch makes"),
        ({"ref_counter_handle": _b64(f"/torch_{os.getpid()}_1_0".encode())}, "receiver's own"),
        ({"ref_counter_handle": "not base64!"}, "not base64"),
        ({"handle": "%%%"}, "not base64"),
        ({"handle": ""}, "empty"),
        ({"event_handle": "?"}, "not base64"),
    ],
    ids=[
        "offset at the end",
        "offset far away",
        "path",
        "another file",
        "short name",
        "unicode digits",
        "own counter",
        "counter not base64",
        "handle not base64",
        "empty handle",
        "event not base64",
    ],
)
def test_a_cuda_output_with_a_field_torch_would_misuse_is_refused_before_torch_sees_it(
    rebuilds: list, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(TransportError, match=message) as refused:
        receive(_cuda_ref(**fields), max_bytes=LIMIT)
    assert type(refused.value) is TransportError  # the sender's violation, not the machine's
    assert rebuilds == []


def test_names_made_by_share_for_cpu_tensors_are_never_taken_for_cuda_counters() -> None:
    name = f"cuda-agent-{shm_tag()}-{uuid.uuid4().hex}"
    assert transport.TORCH_REF_COUNTER.fullmatch(name) is None
