"""Suite metrics against hand-computed examples (and the CUDA Agent paper's own Table 1 arithmetic)."""

from __future__ import annotations

import math

import pytest

from cuda_agent_mcp.bench.metrics import fast_p, geomean, group_metrics, suite_groups
from cuda_agent_mcp.bench.models import TaskRow
from cuda_agent_mcp.results import SpeedOfLight, SpeedupInterval


def row(task: str, outcome: str = "correct", *, level: int | None = 1, eager: float | None = None,
        compile: float | None = None, reward: float | None = None, failure: str | None = None,
        sol: tuple[float, float] | None = None, ci: tuple[float, float] | None = None) -> TaskRow:  # fmt: skip
    return TaskRow(
        task_id=task,
        name=task,
        level=level,
        solution=None,
        solution_kind=None,
        outcome=outcome,  # type: ignore[arg-type]
        failure=failure,
        reward=reward,
        speedup_vs_eager=eager,
        speedup_vs_compile=compile,
        speedup_vs_compile_ci=SpeedupInterval(low=ci[0], high=ci[1]) if ci else None,
        speed_of_light=(
            SpeedOfLight(t_sol_ms=1.0, bytes_moved=1, flops=0, bound="memory", fraction=sol[0], score=sol[1])
            if sol
            else None
        ),
    )


# Five scored tasks (three correct), one task error and one infrastructure error, which never count.
ROWS = [
    row("a", eager=2.0, compile=1.5, reward=3, sol=(0.5, 0.75), ci=(1.2, 1.8)),
    row("b", eager=1.0, compile=0.5, reward=1, ci=(0.45, 0.55)),
    row("c", eager=4.0, compile=1.05, reward=2, sol=(0.25, 0.6), ci=(0.98, 1.1)),
    row("d", "incorrect", reward=-1, failure="wrong_output"),
    row("e", "incorrect", reward=-1, failure="missing_solution"),
    row("f", "task_error", failure="baseline_failed"),
    row("g", "infra_error", failure="infrastructure"),
]


def test_task_and_infrastructure_errors_are_left_out_of_every_denominator() -> None:
    metrics = group_metrics("overall", ROWS)
    assert (metrics.tasks, metrics.scored, metrics.correct) == (7, 5, 3)
    assert metrics.pass_rate == pytest.approx(3 / 5)
    assert metrics.task_errors == ["f"] and metrics.infra_errors == ["g"]


def test_fast_p_counts_correct_tasks_strictly_faster_than_p_over_all_scored_tasks() -> None:
    eager = group_metrics("overall", ROWS).eager
    # speedups 2, 1, 4: b is exactly 1x (not faster), a is exactly 2x (not above 2).
    assert [(f.p, f.count, f.rate) for f in eager.fast_p] == [
        (0.0, 3, pytest.approx(0.6)),
        (1.0, 2, pytest.approx(0.4)),
        (1.05, 2, pytest.approx(0.4)),
        (1.5, 2, pytest.approx(0.4)),
        (2.0, 1, pytest.approx(0.2)),
    ]
    compile_ = group_metrics("overall", ROWS).compile
    # speedups 1.5, 0.5, 1.05: c at exactly 1.05 is not above 1.05, a at exactly 1.5 not above 1.5.
    assert [f.count for f in compile_.fast_p] == [3, 2, 1, 0, 0]


def test_fast_p_by_interval_counts_only_intervals_wholly_above_p() -> None:
    scored = [r for r in ROWS if r.outcome in ("correct", "incorrect")]
    # a's interval [1.2, 1.8] lies above 1; c's [0.98, 1.1] straddles it.
    assert fast_p(scored, "compile", 1.0).count_ci == 1
    assert fast_p(scored, "eager", 1.0).count_ci is None  # no eager interval was measured


def test_geomean_is_over_correct_tasks_and_with_failures_counted_as_one() -> None:
    metrics = group_metrics("overall", ROWS)
    assert metrics.eager.geomean_speedup == pytest.approx(2.0)  # (2 * 1 * 4) ** (1/3)
    assert metrics.eager.geomean_speedup_failures_as_1x == pytest.approx(8 ** (1 / 5))
    assert metrics.compile.geomean_speedup == pytest.approx(0.7875 ** (1 / 3))  # 1.5 * 0.5 * 1.05
    assert metrics.compile.geomean_speedup_failures_as_1x == pytest.approx(0.7875 ** (1 / 5))


def test_rewards_failures_and_speed_of_light_are_summarised_over_scored_tasks() -> None:
    metrics = group_metrics("overall", ROWS)
    assert metrics.mean_reward == pytest.approx((3 + 1 + 2 - 1 - 1) / 5)
    assert [(c.key, c.count) for c in metrics.rewards] == [("-1", 2), ("1", 1), ("2", 1), ("3", 1)]
    assert [(c.key, c.count) for c in metrics.failures] == [("missing_solution", 1), ("wrong_output", 1)]
    assert metrics.sol_measured == 2  # b is correct without a figure: not measured, left out
    assert metrics.sol_fraction_median == pytest.approx(0.375)
    assert metrics.sol_score_mean == pytest.approx(0.675)
    assert metrics.sol_score_mean_failures_as_0 == pytest.approx((0.75 + 0.6) / 4)  # d and e count 0


def test_the_pooled_overall_figures_reproduce_the_cuda_agent_papers_table_1() -> None:
    """Table 1's overall row is weighted by problems per level: 98.8 % pass and a 2.11x geomean vs
    compile from levels at 100 %/1.87x, 100 %/2.80x and 94 %/1.52x (100, 100 and 50 problems)."""
    rows = [row(f"l1/{i}", level=1, compile=1.87, eager=2.48) for i in range(100)]
    rows += [row(f"l2/{i}", level=2, compile=2.80, eager=3.27) for i in range(100)]
    rows += [row(f"l3/{i}", level=3, compile=1.52, eager=1.80) for i in range(47)]
    rows += [row(f"l3/x{i}", "incorrect", level=3, failure="wrong_output") for i in range(3)]
    overall, level1, level2, level3 = suite_groups(rows)
    assert overall.pass_rate == pytest.approx(0.988)
    assert round(overall.compile.geomean_speedup_level_weighted or 0, 2) == 2.11
    assert round(overall.eager.geomean_speedup_level_weighted or 0, 2) == 2.60
    # Pooled over the 247 correct tasks, level 3 weighs 47 rather than 50.
    assert overall.compile.geomean_speedup == pytest.approx(
        math.exp((100 * math.log(1.87) + 100 * math.log(2.80) + 47 * math.log(1.52)) / 247)
    )
    assert [g.group for g in (level1, level2, level3)] == ["level 1", "level 2", "level 3"]
    assert level3.pass_rate == pytest.approx(0.94)


def test_geomean_of_nothing_is_not_measured_and_a_non_positive_speedup_is_an_error() -> None:
    assert geomean([]) is None
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    empty = group_metrics("overall", [row("x", "task_error")])
    assert empty.scored == 0 and empty.pass_rate is None and empty.eager.fast_p[0].rate is None
    assert not math.isnan(empty.eager.fast_p[1].count)
