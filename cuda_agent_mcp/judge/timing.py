"""Statistics of timed samples, and the judge's cross-check of a worker's reported times."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from cuda_agent_mcp.evaluation.datasheets import PEAK_BANDWIDTH_BYTES_PER_S
from cuda_agent_mcp.results import TimingStats


def summarize(
    samples_ms: list[float],
    discarded: int = 0,
    excess_ms: list[float] | None = None,
    harness_ms: float | None = None,
    batch_calls: int = 1,
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
        samples_ms=[round(s, 6) for s in samples_ms[:MAX_KEPT_SAMPLES]],
        batch_calls=batch_calls,
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


# Principle 4: every tolerance between the three clocks is relative to what was measured. The only fixed
# term is the clocks' own resolution; batches hold at least a millisecond of work (judge.TARGET_WINDOW_MS),
# so 5% of a window is more than a small kernel's whole run.
RELATIVE_TOLERANCE = 0.05
# One batch whose clocks disagree by more than this share of its window is discarded (scheduling noise of
# a tenth of a millisecond is common on the H200); discarding grants nothing, and the median of all the
# batches' excess must still stay within RELATIVE_TOLERANCE (`systematic_excess`), or the timing is
# rejected: hidden work has to be in every call to help, and then the median shows it.
SAMPLE_TOLERANCE = 0.25
CLOCK_RESOLUTION_MS = 0.005
MAX_KEPT_SAMPLES = 512


def clock_problem(
    event_ms: float, worker_wall_ms: float, judge_ms: float, overhead_ms: float, sync_ms: float = 0.0
) -> str | None:
    """Which cross-check of one batch's clocks failed, or None.

    Three clocks: CUDA events on the launch stream and a wall clock around the batch closed by a
    device-wide synchronize (both in the worker, so both forgeable), and the judge's clock from sending the
    run request to receiving its reply, which bounds the real time from above. Work on another stream shows
    as wall time the events missed; a patched event timer shows the same way; a worker that forges both
    still has to spend the time before it replies, which the judge's clock sees beyond the round trip and
    the harness's calibrated cost (`overhead_ms`). `sync_ms` is the calibrated latency between the wall
    clock and the events (recording an event, returning from the synchronize), measured with no candidate.
    """
    slack = SAMPLE_TOLERANCE * event_ms + CLOCK_RESOLUTION_MS
    if event_ms > worker_wall_ms + slack:
        return "events above the worker's wall clock"
    if worker_wall_ms > judge_ms + CLOCK_RESOLUTION_MS:
        return "worker's wall clock above the judge's"
    if worker_wall_ms - event_ms - sync_ms > slack:
        return "worker's wall clock beyond the events"
    if judge_ms - worker_wall_ms - overhead_ms > slack:
        return "judge's clock beyond the worker's"
    return None


def systematic_excess(excess_ms: list[float], windows_ms: list[float]) -> bool:
    """True when, over all timed batches, the judge's clock exceeds the worker's wall clock by more than
    the round trip and the harness's cost by over 5% of the median window: one late reply is scheduling
    noise, a median excess is hidden work."""
    if not excess_ms or not windows_ms:
        return False
    return (
        statistics.median(excess_ms)
        > RELATIVE_TOLERANCE * statistics.median(windows_ms) + CLOCK_RESOLUTION_MS
    )


@dataclass(frozen=True)
class HarnessCost:
    """What the harness itself costs inside the judge's clock, measured before any candidate code is in
    the worker: a fixed part (messages, wake-ups) and a part per output tensor shared back. Capped, so a
    machine noisy enough to calibrate high cannot open a large hiding place."""

    fixed_ms: float = 0.0
    per_output_ms: float = 0.0
    sync_ms: float = 0.0  # wall clock beyond the events around an empty-ish batch

    MAX_FIXED_MS = 1.0
    MAX_PER_OUTPUT_MS = 0.05
    MAX_SYNC_MS = 0.05

    def ms(self, outputs: int) -> float:
        return self.fixed_ms + self.per_output_ms * max(outputs - 1, 0)

    @classmethod
    def fit(
        cls, excess_by_outputs: dict[int, list[float]], sync_ms: list[float] | None = None
    ) -> HarnessCost:
        """From calibration batches of one and of several outputs (keys: outputs per batch)."""
        medians = {n: statistics.median(v) for n, v in excess_by_outputs.items() if v}
        sync = min(max(statistics.median(sync_ms), 0.0), cls.MAX_SYNC_MS) if sync_ms else 0.0
        if not medians:
            return cls(sync_ms=sync)
        few, many = min(medians), max(medians)
        per_output = (medians[many] - medians[few]) / (many - few) if many > few else 0.0
        per_output = min(max(per_output, 0.0), cls.MAX_PER_OUTPUT_MS)
        fixed = min(max(medians[few] - per_output * (few - 1), 0.0), cls.MAX_FIXED_MS)
        return cls(fixed_ms=fixed, per_output_ms=per_output, sync_ms=sync)


def physical_floor_ms(gpu_name: str, bytes_moved: int) -> float | None:
    """The least time any kernel needs to read its inputs and write its outputs once, at peak bandwidth."""
    for key, bandwidth in PEAK_BANDWIDTH_BYTES_PER_S.items():
        if key in gpu_name:
            return bytes_moved / bandwidth * 1e3
    return None
