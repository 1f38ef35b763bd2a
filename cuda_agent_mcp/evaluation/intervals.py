"""Confidence intervals of speedups (principle 11), by the bootstrap: no torch, the tool layer's side.

A speedup is a ratio of medians (baseline over candidate). Its 95% interval resamples both sides'
per-call samples with replacement, takes the ratio of the resampled medians, and reads the 2.5th and
97.5th percentiles. A milestone reward needs the interval's lower bound past the threshold, not the
median alone; an interval that straddles a threshold is `within_noise`, and the reward is the one below
it. So the same kernel measured again lands on the same side of a threshold unless it really sits on it.
The resampling is seeded by the samples themselves: the same measurements give the same interval.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from cuda_agent_mcp.results import SpeedupInterval, TimingStats

RESAMPLES = 2000
CONFIDENCE = 0.95


def speedup_interval(baseline: TimingStats | None, candidate: TimingStats | None) -> SpeedupInterval | None:
    """The bootstrap interval of baseline.median / candidate.median; None without both sides' samples."""
    if baseline is None or candidate is None or not baseline.samples_ms or not candidate.samples_ms:
        return None
    base = np.asarray(baseline.samples_ms, dtype=np.float64)
    cand = np.asarray(candidate.samples_ms, dtype=np.float64)
    if (cand <= 0).any():
        return None
    rng = np.random.default_rng(_seed(base, cand))
    base_medians = np.median(rng.choice(base, size=(RESAMPLES, base.size), replace=True), axis=1)
    cand_medians = np.median(rng.choice(cand, size=(RESAMPLES, cand.size), replace=True), axis=1)
    ratios = base_medians / cand_medians
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return SpeedupInterval(low=float(low), high=float(high), confidence=CONFIDENCE)


def straddles(interval: SpeedupInterval | None, threshold: float) -> bool:
    """True when the interval has the threshold inside it: the measurement cannot say which side."""
    return interval is not None and interval.low <= threshold < interval.high


def _seed(*arrays: np.ndarray) -> int:
    digest = hashlib.sha256(b"".join(struct.pack(f"{a.size}d", *a) for a in arrays)).digest()
    return int.from_bytes(digest[:8], "little")
