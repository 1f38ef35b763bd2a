"""Rewards from a verdict and timings; fail closed (no verdict, no reward)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

RewardSchedule = Literal["milestones", "log_speedup", "fast_p"]
FAIL = -1.0


def milestones(speedup_vs_eager: float, speedup_vs_compile: float) -> float:
    """The paper's Eq. 1: 3 if >5% faster than eager and compile, 2 if than eager only, else 1.

    "5% faster" is a time reduction: t < 0.95 t0, i.e. speedup > 1/0.95.
    """
    faster_eager = speedup_vs_eager > 1 / 0.95
    faster_compile = speedup_vs_compile > 1 / 0.95
    if faster_eager and faster_compile:
        return 3.0
    if faster_eager:
        return 2.0
    return 1.0


def log_speedup(speedup_vs_eager: float, speedup_vs_compile: float) -> float:
    """Clipped log-speedup against the faster baseline, in [log 0.5, log 10]."""
    best = min(speedup_vs_eager, speedup_vs_compile)
    return max(math.log(0.5), min(math.log(10.0), math.log(best)))


def fast_p(speedup_vs_eager: float, speedup_vs_compile: float) -> float:
    """1 when correct and faster than the faster baseline, else 0 (KernelBench's fast_1)."""
    return 1.0 if min(speedup_vs_eager, speedup_vs_compile) > 1.0 else 0.0


SCHEDULES: dict[str, Callable[[float, float], float]] = {
    "milestones": milestones,
    "log_speedup": log_speedup,
    "fast_p": fast_p,
}
# The speedups at which a schedule's reward steps (log_speedup has none: it is continuous).
THRESHOLDS: dict[str, tuple[float, ...]] = {"milestones": (1 / 0.95,), "fast_p": (1.0,), "log_speedup": ()}


def reward(
    schedule: RewardSchedule,
    passed: bool,
    speedup_vs_eager: float | None,
    speedup_vs_compile: float | None,
    *,
    lower_bounds: tuple[float, float] | None = None,
    capped: bool = False,
) -> float:
    """The reward of one evaluation; anything short of a passed, fully timed kernel gets FAIL.

    `capped`: the timing is untrusted (evidence missing): correctness only, as if no faster than the
    baselines. `lower_bounds`: the speedups' confidence-interval lower bounds; a schedule with thresholds
    grants a step only when the lower bound is past it (principle 11)."""
    if not passed or speedup_vs_eager is None or speedup_vs_compile is None:
        return FAIL
    if capped:
        return SCHEDULES[schedule](1.0, 1.0)
    if lower_bounds is not None and THRESHOLDS[schedule]:
        return SCHEDULES[schedule](*lower_bounds)
    return SCHEDULES[schedule](speedup_vs_eager, speedup_vs_compile)
