"""Statistics of timed samples, and the judge's cross-check of a worker's reported times."""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
from collections.abc import Iterator

from cuda_agent_mcp.results import TimingStats

# Peak DRAM bandwidth by GPU name (vendor datasheets), for the physical floor on a kernel's time.
PEAK_BANDWIDTH_BYTES_PER_S = {"H200": 4.8e12, "H100": 3.35e12, "H20": 4.0e12, "A100": 2.0e12, "B200": 8.0e12}


@contextlib.contextmanager
def paused_garbage_collection() -> Iterator[None]:
    """No collection runs inside a clock: a pause of a millisecond or more, at random, would be charged
    to whatever the clock is timing. Garbage made meanwhile waits for the next collection after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def summarize(
    samples_ms: list[float],
    discarded: int = 0,
    excess_ms: list[float] | None = None,
    harness_ms: float | None = None,
) -> TimingStats:
    ordered = sorted(samples_ms)
    mean = statistics.fmean(ordered)
    stdev = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return TimingStats(
        median_ms=statistics.median(ordered),
        mean_ms=mean,
        min_ms=ordered[0],
        p25_ms=_quantile(ordered, 0.25),
        p75_ms=_quantile(ordered, 0.75),
        cv=stdev / mean if mean > 0 else 0.0,
        samples=len(ordered),
        discarded_samples=discarded,
        judge_excess_median_ms=statistics.median(excess_ms) if excess_ms else None,
        judge_excess_max_ms=max(excess_ms) if excess_ms else None,
        harness_excess_ms=harness_ms,
    )


def median_rse(samples_ms: list[float]) -> float:
    """Relative standard error of the median (1.2533 sigma / sqrt(n) / median)."""
    if len(samples_ms) < 3:
        return math.inf
    median = statistics.median(samples_ms)
    return (
        1.2533 * statistics.stdev(samples_ms) / math.sqrt(len(samples_ms)) / median
        if median > 0
        else math.inf
    )


def _quantile(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def disagrees(event_ms: float, worker_wall_ms: float | None, judge_ms: float, overhead_ms: float) -> bool:
    """True when a worker's reported times cannot be right.

    Three clocks: CUDA events on the launch stream and a wall clock around the call with a device-wide
    synchronize (both in the worker, so both forgeable), and the judge's clock from sending fresh inputs to
    receiving the reply, which bounds the real time from above. Work on another stream shows as wall time
    the events missed; a patched event timer shows the same way; a worker that forges both still has to
    spend the time before it replies, which the judge's clock sees (beyond the measured round-trip overhead).
    """
    return disagreement(event_ms, worker_wall_ms, judge_ms, overhead_ms) is not None


def disagreement(
    event_ms: float, worker_wall_ms: float | None, judge_ms: float, overhead_ms: float
) -> str | None:
    """Which check of `disagrees` failed (for the verdict's message), or None."""
    if worker_wall_ms is None:
        return "no wall clock"
    if event_ms > worker_wall_ms + 0.05 + 0.1 * event_ms:
        return "events above the worker's wall clock"
    if worker_wall_ms > judge_ms + 0.05:
        return "worker's wall clock above the judge's"
    if worker_wall_ms - event_ms > 0.2 + 0.25 * event_ms:
        return "worker's wall clock beyond the events"
    if judge_ms - worker_wall_ms > overhead_ms + 0.5 + 0.25 * event_ms:
        return "judge's clock beyond the worker's"
    return None


def systematic_excess(excess_ms: list[float], event_samples_ms: list[float]) -> bool:
    """True when, over all timed calls, the judge's clock exceeds the worker's wall clock by more than the
    round-trip overhead: one late reply is scheduling noise, a median above the margin is hidden work."""
    if not excess_ms or not event_samples_ms:
        return False
    typical = statistics.median(event_samples_ms)
    return statistics.median(excess_ms) > 0.5 + 0.25 * typical


def physical_floor_ms(gpu_name: str, bytes_moved: int) -> float | None:
    """The least time any kernel needs to read its inputs and write its outputs once, at peak bandwidth."""
    for key, bandwidth in PEAK_BANDWIDTH_BYTES_PER_S.items():
        if key in gpu_name:
            return bytes_moved / bandwidth * 1e3
    return None
