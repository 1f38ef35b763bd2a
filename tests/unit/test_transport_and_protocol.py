"""What the judge accepts from a worker: only well-formed frames and tensor descriptions that stay inside
their storage. Everything else is a protocol violation, before any memory is mapped."""

from __future__ import annotations

import os

import pytest
import torch

from cuda_agent_mcp.wire.protocol import (
    MAX_FRAME_BYTES,
    BatchResult,
    FrameError,
    Loaded,
    encode,
    parse_reply,
    read_frame_body,
    write_frame,
)
from cuda_agent_mcp.wire.refs import TensorRef, release_shm
from cuda_agent_mcp.wire.transport import TransportError, open_ref, share


@pytest.fixture
def shared() -> TensorRef:
    ref = share(torch.arange(12, dtype=torch.float32).reshape(3, 4))
    yield ref
    release_shm(ref)


def test_a_shared_tensor_round_trips_exactly(shared: TensorRef) -> None:
    opened = open_ref(shared, max_bytes=1 << 20)
    assert type(opened) is torch.Tensor
    assert torch.equal(opened, torch.arange(12, dtype=torch.float32).reshape(3, 4))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dtype": "complex64"}, "not allowed"),
        ({"shape": [3, 5]}, "past the end of its storage"),
        ({"stride": [4]}, "equal length"),
        ({"shape": [3, -4]}, "non-negative"),
        ({"storage_offset": 1}, "past the end of its storage"),
    ],
)
def test_descriptions_that_leave_their_storage_are_refused(
    shared: TensorRef, change: dict, message: str
) -> None:
    forged = shared.model_copy(update=change)
    with pytest.raises(TransportError, match=message):
        open_ref(forged, max_bytes=1 << 20)


def test_a_tensor_larger_than_the_limit_is_refused(shared: TensorRef) -> None:
    with pytest.raises(TransportError, match="exceeds the limit"):
        open_ref(shared, max_bytes=16)


def test_a_shared_memory_name_outside_our_namespace_is_rejected_by_the_model() -> None:
    with pytest.raises(ValueError):
        TensorRef.model_validate(
            {
                "dtype": "float32",
                "shape": [1],
                "stride": [1],
                "storage_offset": 0,
                "payload": {"kind": "shm", "name": "../../etc/passwd", "storage_size_bytes": 4},
            }
        )


def test_frames_round_trip_and_oversized_or_malformed_ones_are_refused() -> None:
    read_fd, write_fd = os.pipe()
    try:
        write_frame(write_fd, Loaded(parameter_count=3))
        assert parse_reply(read_frame_body(read_fd)) == Loaded(parameter_count=3)
        os.write(write_fd, (MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
        with pytest.raises(FrameError, match="exceeds"):
            read_frame_body(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    with pytest.raises(FrameError, match="invalid reply"):
        parse_reply(b'{"op": "result", "sets": [], "event_ms": -1.0}')
    with pytest.raises(FrameError, match="invalid reply"):
        parse_reply(b"not json")
    assert len(encode(BatchResult(sets=[]))) < 200
    # The poison value NaN crosses as NaN: JSON's usual null would read back as "no poison".
    from cuda_agent_mcp.wire.protocol import PrepareRequest, parse_request

    prepared = parse_request(
        encode(PrepareRequest(sets=[[None]], scalars_pickle=[""], poison=float("nan"), poison_bytes=8))[4:]
    )
    assert isinstance(prepared, PrepareRequest) and prepared.poison != prepared.poison
