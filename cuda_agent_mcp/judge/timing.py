"""Statistics of timed samples, and the judge's cross-check of a worker's reported times."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from cuda_agent_mcp.evaluation.datasheets import PEAK_BANDWIDTH_BYTES_PER_S
from cuda_agent_mcp.evaluation.job import TimingPolicy
from cuda_agent_mcp.results import TimingStats


def summarize(
    samples_ms: list[float],
    discarded: int = 0,
    excess_ms: list[float] | None = None,
    null: HiddenWork | None = None,
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
        harness_excess_ms=null.null_excess_ms if null is not None else None,
        hidden_fraction=round(null.hidden_fraction, 6) if null is not None else None,
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


def timing_done(
    samples_ms: list[float], discarded: int, policy: TimingPolicy, elapsed_s: float, *, undecided: bool
) -> bool:
    """Whether a worker's timed batches may stop: at `max_samples` always; otherwise once there are
    `min_samples` and the median is precise enough or the budget is spent, unless the hidden-work
    statistic is still `undecided` (the null too scattered to see a forger, `HiddenWork.null_too_noisy`).
    Its standard error falls as one over the square root of the batches, so sampling goes on past the
    budget before the null's scatter is called the machine's failure: on the H200 a 1 MB ReLU's batches
    (44 outputs shared each) scattered the null by 1.3 to 2 ms, and every profile of it was an
    infrastructure failure after the 2 s budget's 21 batches."""
    if len(samples_ms) + discarded >= policy.max_samples:
        return True
    if len(samples_ms) < policy.min_samples or undecided:
        return False
    return median_rse(samples_ms) < policy.target_rse or elapsed_s > policy.budget_s


def _quantile(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# Principle 4: every tolerance between clocks is relative to what was measured. The worker's two clocks
# (CUDA events, its wall clock) are checked against each other per batch; the judge's clock, which alone a
# worker cannot forge, is checked against a null measured in the same conditions (`hidden_work`).
# One batch whose worker clocks disagree by more than this share of its window is discarded; discarding
# grants nothing, and more than half discarded rejects.
SAMPLE_TOLERANCE = 0.25
CLOCK_RESOLUTION_MS = 0.005
MAX_KEPT_SAMPLES = 512
# The wall clock's own latency beyond the events (recording an event, returning from the synchronize),
# taken from the null worker's batches; capped, so it never opens room for work on other streams.
MAX_SYNC_MS = 0.05


def clock_problem(
    event_ms: float, worker_wall_ms: float, judge_ms: float, sync_ms: float = 0.0
) -> str | None:
    """Which cross-check of one batch's clocks failed, or None.

    CUDA events on the launch stream and a wall clock around the batch closed by a device-wide synchronize
    are both the worker's, so both are forgeable; what they must agree on is checked here. Work on another
    stream shows as wall time the events missed; a patched event timer shows the same way; a wall clock
    beyond the judge's own is impossible. A worker that forges both clocks consistently is left to
    `hidden_work`: it still has to spend the time before it replies, and the judge's clock sees that.
    """
    slack = SAMPLE_TOLERANCE * event_ms + CLOCK_RESOLUTION_MS
    if event_ms > worker_wall_ms + slack:
        return "events above the worker's wall clock"
    if worker_wall_ms > judge_ms + CLOCK_RESOLUTION_MS:
        return "worker's wall clock above the judge's"
    if worker_wall_ms - event_ms - sync_ms > slack:
        return "worker's wall clock beyond the events"
    return None


# The timing rule (issue 23). Per batch, the judge's excess is its clock around the run request minus the
# worker's wall clock and a ping's round trip: the harness's own cost (waking processes, sharing outputs)
# plus any work the worker did outside its clocks. A clean worker with no candidate code (the null) runs
# batches of the same size, output shapes and window length, interleaved with the candidate's, so its
# excess is the harness's cost as it is right now on this machine. The statistic is the lower confidence
# bound of the candidate's median excess beyond the null's, as a fraction of the window:
#     hidden_fraction = (median(c) - median(null) - Z * SE) / max(window, MIN_WINDOW_MS)
# with SE the standard error of that difference of medians, from the null's robust spread. Honest kernels
# sit at or below zero; a worker that forges both of its clocks to hide a share f of its time shows
# f / (1 - f). It rejects above HIDDEN_FRACTION_LIMIT. The figures behind the constants (H200, honest
# corpus and forgeries) are in docs/DECISIONS.md.
HIDDEN_FRACTION_LIMIT = 0.10
CONFIDENCE_Z = 3.0
# Windows of tiny kernels are capped by the batch size; below this the fraction is taken of this much.
MIN_WINDOW_MS = 2.0
# A null so scattered that the statistic's confidence margin (Z standard errors) would cover more than
# half a window cannot see hidden work: an infrastructure failure, never room granted to the candidate.
# (Not its size: on the H200 the null's median excess was 1.3 to 6.3 ms per batch, growing with the outputs
# a batch shares, and the candidates' matched it within its spread.)
MAX_MARGIN_FRACTION = 0.5
# The standard error never counts as smaller than the clocks' resolution.
MIN_SPREAD_MS = 0.01


@dataclass(frozen=True)
class HiddenWork:
    """The candidate's excess set against the interleaved null's, and the verdict on it."""

    candidate_excess_ms: float  # median over the candidate's timed batches
    null_excess_ms: float  # median over the null's batches
    standard_error_ms: float
    window_ms: float  # median of the candidate's (reported) windows
    hidden_fraction: float  # the statistic: lower confidence bound of hidden time per window
    batches: int
    null_batches: int

    @property
    def rejects(self) -> bool:
        return self.hidden_fraction > HIDDEN_FRACTION_LIMIT

    @property
    def null_too_noisy(self) -> bool:
        return CONFIDENCE_Z * self.standard_error_ms > MAX_MARGIN_FRACTION * max(
            self.window_ms, MIN_WINDOW_MS
        )

    def describe(self) -> str:
        return (
            f"the judge's clock ran a median {self.candidate_excess_ms:.4f} ms beyond the worker's per batch "
            f"against {self.null_excess_ms:.4f} ms for a clean worker's interleaved batches (standard error "
            f"{self.standard_error_ms:.4f} ms) over {self.window_ms:.4f} ms windows: at least "
            f"{max(self.hidden_fraction, 0.0):.1%} of each window is unaccounted for (at most "
            f"{HIDDEN_FRACTION_LIMIT:.0%} allowed)"
        )


def hidden_work(
    candidate_excess_ms: list[float], null_excess_ms: list[float], windows_ms: list[float]
) -> HiddenWork | None:
    """The statistic over one evaluation's batches (None without batches on both sides)."""
    if not candidate_excess_ms or not null_excess_ms or not windows_ms:
        return None
    candidate = statistics.median(candidate_excess_ms)
    null = statistics.median(null_excess_ms)
    # Robust spread of one batch's excess: the null's MAD (scaled to a standard deviation), also taken
    # from the candidate's own batches when those scatter more (their median is less certain then).
    spread = max(_robust_sd(null_excess_ms), _robust_sd(candidate_excess_ms), MIN_SPREAD_MS)
    error = 1.2533 * spread * math.sqrt(1 / len(candidate_excess_ms) + 1 / len(null_excess_ms))
    window = statistics.median(windows_ms)
    fraction = (candidate - null - CONFIDENCE_Z * error) / max(window, MIN_WINDOW_MS)
    return HiddenWork(
        candidate_excess_ms=candidate,
        null_excess_ms=null,
        standard_error_ms=error,
        window_ms=window,
        hidden_fraction=fraction,
        batches=len(candidate_excess_ms),
        null_batches=len(null_excess_ms),
    )


def _robust_sd(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    centre = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - centre) for v in values)


def calls_per_batch(
    window_ms: float,
    event_ms: float | None,
    judge_ms: float,
    calls: int,
    *,
    cap: int,
) -> int:
    """Calls per batch for `window_ms` of device work: sized by the events' device time per call, or, when
    that would give fewer calls, by the judge's clock (an upper bound on the real time per call), so a
    worker that reports slow calls in its warm-up cannot shrink its own windows."""
    wanted = 1
    for per_batch in (event_ms, judge_ms):
        if per_batch is not None:
            # A batch that took no measurable time (the round trip outweighed it) asks for the most calls.
            wanted = max(wanted, math.ceil(window_ms * calls / max(per_batch, 1e-3)))
    return max(1, min(wanted, cap))


def physical_floor_ms(gpu_name: str, bytes_moved: int) -> float | None:
    """The least time any kernel needs to read its inputs and write its outputs once, at peak bandwidth."""
    for key, bandwidth in PEAK_BANDWIDTH_BYTES_PER_S.items():
        if key in gpu_name:
            return bytes_moved / bandwidth * 1e3
    return None
