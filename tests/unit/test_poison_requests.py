"""The worker's poisoning asks the caching allocator for its free blocks from the pools they lie in."""

from __future__ import annotations

from typing import Any

from cuda_agent_mcp.worker.runner import SMALL_REQUEST_BYTES, poison_requests

MIB = 1 << 20


def _segment(kind: str, *blocks: tuple[int, str], device: int = 0) -> dict[str, Any]:
    return {
        "device": device,
        "segment_type": kind,
        "blocks": [{"size": size, "state": state} for size, state in blocks],
    }


def test_a_free_small_segment_is_asked_for_in_pieces_the_small_pool_serves() -> None:
    # A whole free 2 MiB small segment asked for whole would go to the large pool: a new segment a batch.
    snapshot = [
        _segment("small", (2 * MIB, "inactive")),
        _segment("small", (MIB, "active_allocated"), (MIB, "inactive")),
    ]
    requests = poison_requests(snapshot, 0)
    assert requests == [MIB, MIB, MIB]
    assert all(size <= SMALL_REQUEST_BYTES for size in requests)


def test_uneven_small_blocks_keep_their_remainder_and_every_free_byte_is_asked_for() -> None:
    snapshot = [_segment("small", (512, "inactive"), (MIB + 1536, "inactive"), (1024, "active_allocated"))]
    requests = poison_requests(snapshot, 0)
    assert requests == [MIB, 1536, 512]
    assert sum(requests) == 512 + MIB + 1536


def test_large_blocks_are_asked_for_whole_and_large_crumbs_that_no_request_can_get_are_skipped() -> None:
    snapshot = [
        _segment("large", (44 * MIB, "inactive"), (MIB, "inactive"), (20 * MIB, "active_allocated")),
        _segment("large", (6 * MIB, "inactive"), (512 * 1024, "inactive")),
    ]
    assert poison_requests(snapshot, 0) == [44 * MIB, 6 * MIB]


def test_only_the_workers_device_counts() -> None:
    snapshot = [_segment("large", (8 * MIB, "inactive"), device=1), _segment("large", (4 * MIB, "inactive"))]
    assert poison_requests(snapshot, 0) == [4 * MIB]
    assert poison_requests(snapshot, 1) == [8 * MIB]
