"""Suite metrics from task rows: pass rate, fast_p, geomean speedups, SOL, rewards and failures.

Definitions (docs/bench.md gives their sources):
- A row is *scored* unless it is a task error (the baseline failed) or an infrastructure error: those are
  left out of every denominator and listed.
- fast_p against a baseline (KernelBench, `src/kernelbench/score.py: fastp`): correct tasks whose speedup
  is strictly above p, divided by the scored tasks. fast_0 is the correctness rate among timed tasks.
- Geomean speedup (KernelBench `geometric_mean_speed_ratio_correct_only`; the CUDA Agent paper's
  "Speed-up"): over correct tasks only. Also given with every scored task that is not correct counted
  as 1x, which does not flatter a run that solved few tasks.
- Overall figures pool every scored task, which is the paper's "weighted by the number of problems in
  each level".
- Each kernel language present gets the overall figures of its own rows (`language cupy`), so a run of
  two languages compares them on the same definitions.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

from cuda_agent_mcp.bench.models import (
    FAST_P,
    Baseline,
    BaselineMetrics,
    Count,
    FastP,
    GroupMetrics,
    TaskRow,
)
from cuda_agent_mcp.workspace import LANGUAGES


def scored(rows: Iterable[TaskRow]) -> list[TaskRow]:
    """The denominator: every row but task and infrastructure errors."""
    return [r for r in rows if r.outcome in ("correct", "incorrect")]


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None for none."""
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError("a speedup must be positive")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def fast_p(rows: Sequence[TaskRow], baseline: Baseline, p: float) -> FastP:
    """KernelBench's fast_p over `rows` (which must be the scored rows of a group)."""
    correct = [r for r in rows if r.outcome == "correct"]
    count = sum(1 for r in correct if (s := r.speedup(baseline)) is not None and s > p)
    intervals = [r.interval(baseline) for r in correct if r.speedup(baseline) is not None]
    count_ci = (
        sum(1 for i in intervals if i is not None and i.low > p)
        if intervals and all(i is not None for i in intervals)
        else None
    )
    return FastP(p=p, count=count, rate=count / len(rows) if rows else None, count_ci=count_ci)


def baseline_metrics(rows: Sequence[TaskRow], baseline: Baseline) -> BaselineMetrics:
    speedups = [s for r in rows if r.outcome == "correct" and (s := r.speedup(baseline)) is not None]
    with_failures = [
        (s if r.outcome == "correct" and (s := r.speedup(baseline)) is not None else 1.0) for r in rows
    ]
    return BaselineMetrics(
        baseline=baseline,
        measured=len(speedups),
        fast_p=[fast_p(rows, baseline, p) for p in FAST_P],
        geomean_speedup=geomean(speedups),
        geomean_speedup_failures_as_1x=geomean(with_failures) if speedups else None,
    )


def group_metrics(group: str, rows: Sequence[TaskRow]) -> GroupMetrics:
    """Every metric of one group of rows."""
    counted = scored(rows)
    correct = [r for r in counted if r.outcome == "correct"]
    rewards = [r.reward for r in counted if r.reward is not None]
    sol = [r.speed_of_light for r in correct if r.speed_of_light is not None]
    fractions = [s.fraction for s in sol if s.fraction is not None]
    scores = [s.score for s in sol if s.score is not None]
    failed_scores = [0.0 for r in counted if r.outcome == "incorrect"]
    failures = Counter(r.failure or "unknown" for r in counted if r.outcome == "incorrect")
    return GroupMetrics(
        group=group,
        tasks=len(rows),
        scored=len(counted),
        correct=len(correct),
        pass_rate=len(correct) / len(counted) if counted else None,
        eager=baseline_metrics(counted, "eager"),
        compile=baseline_metrics(counted, "compile"),
        mean_reward=statistics.fmean(rewards) if rewards else None,
        rewards=_counts(Counter(f"{r:g}" for r in rewards), numeric=True),
        sol_measured=len(sol),
        sol_fraction_median=statistics.median(fractions) if fractions else None,
        sol_score_mean=statistics.fmean(scores) if scores else None,
        sol_score_mean_failures_as_0=statistics.fmean(scores + failed_scores) if scores else None,
        failures=_counts(failures),
        task_errors=[r.task_id for r in rows if r.outcome == "task_error"],
        infra_errors=[r.task_id for r in rows if r.outcome == "infra_error"],
    )


def suite_groups(rows: Sequence[TaskRow]) -> list[GroupMetrics]:
    """Overall first, then each level present (rows without a level form `other`)."""
    overall = group_metrics("overall", rows)
    levels = sorted({r.level for r in rows if r.level is not None})
    parts = [group_metrics(f"level {level}", [r for r in rows if r.level == level]) for level in levels]
    if levels and any(r.level is None for r in rows):
        parts.append(group_metrics("other", [r for r in rows if r.level is None]))
    if len(parts) > 1:
        overall = overall.model_copy(
            update={
                "eager": _level_weighted(overall.eager, [g.eager for g in parts], parts),
                "compile": _level_weighted(overall.compile, [g.compile for g in parts], parts),
            }
        )
    return [overall, *parts]


def language_groups(rows: Sequence[TaskRow]) -> list[GroupMetrics]:
    """One group per kernel language present, in LANGUAGES order: the overall figures of its rows
    (pass rate, fast_p, geomeans, the level-weighted geomean where it spans levels)."""
    return [
        suite_groups(part)[0].model_copy(update={"group": f"language {language}"})
        for language in LANGUAGES
        if (part := [r for r in rows if r.language == language])
    ]


def _level_weighted(
    overall: BaselineMetrics, levels: list[BaselineMetrics], groups: list[GroupMetrics]
) -> BaselineMetrics:
    """exp(sum of n_level * ln(geomean_level) / sum of n_level), n = scored tasks of the level."""
    pairs = [(g.scored, m.geomean_speedup) for g, m in zip(groups, levels, strict=True) if m.geomean_speedup]
    total = sum(n for n, _ in pairs)
    value = math.exp(sum(n * math.log(v) for n, v in pairs) / total) if total else None
    return overall.model_copy(update={"geomean_speedup_level_weighted": value})


def _counts(counter: Counter[str], *, numeric: bool = False) -> list[Count]:
    if numeric:
        ordered = sorted(counter.items(), key=lambda item: float(item[0]))
    else:
        ordered = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    return [Count(key=key, count=count) for key, count in ordered]
