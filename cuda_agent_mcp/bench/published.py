"""Our baseline table against KernelBench's published timings (`results/timing/<hardware>/*.json`).

KernelBench publishes the mean eager time per problem file (`{"level1": {"19_ReLU.py": {"mean": ...}}}`)
measured on H100s. The ratio of our H200 median to their H100 mean, task by task, is a sanity check of
the whole timing path: the H200 has ~1.4x the H100 SXM's memory bandwidth and the same SMs, so
memory-bound problems should land near 0.7 and none should be off by an order of magnitude.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.bench.baselines import BaselineTable
from cuda_agent_mcp.tasks import Task


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RatioRow(_Frozen):
    task_id: str
    ours_ms: float
    published_ms: float
    ratio: float = Field(description="ours / published")


class RatioSummary(_Frozen):
    """The distribution of ours / published over the tasks both measured."""

    published: str = Field(description="the published file compared against")
    hardware: str
    compared: int
    only_ours: int = Field(description="tasks in our table that the published file lacks")
    median: float | None
    p10: float | None
    p90: float | None
    minimum: float | None
    maximum: float | None
    outliers: list[RatioRow] = Field(description="ratios outside [p10/3, p90*3], largest deviation first")
    rows: list[RatioRow]


def compare_with_published(
    table: BaselineTable, tasks: list[Task], published: Path, *, baseline: str = "eager"
) -> RatioSummary:
    """Ratios of our `baseline` medians to a KernelBench timing file, by problem file name."""
    data = json.loads(published.read_text())
    by_id = {t.id: t for t in tasks}
    rows: list[RatioRow] = []
    only_ours = 0
    hardware = ""
    for task_id, entry in table.entries.items():
        task = by_id.get(task_id)
        if task is None or task.level is None or task.source.path is None:
            continue
        found = data.get(f"level{task.level}", {}).get(Path(task.source.path).name)
        if (
            not isinstance(found, dict)
            or not isinstance(found.get("mean"), int | float)
            or found["mean"] <= 0
        ):
            only_ours += 1
            continue
        hardware = hardware or str(found.get("hardware", ""))
        ours = (entry.eager if baseline == "eager" else entry.compiled).median_ms
        rows.append(
            RatioRow(task_id=task_id, ours_ms=ours, published_ms=found["mean"], ratio=ours / found["mean"])
        )
    ratios = sorted(r.ratio for r in rows)

    def quantile(q: float) -> float | None:
        if not ratios:
            return None
        return ratios[min(len(ratios) - 1, int(q * (len(ratios) - 1) + 0.5))]

    p10, p90 = quantile(0.1), quantile(0.9)
    outliers = []
    if p10 is not None and p90 is not None:
        centre = statistics.median(ratios)
        outliers = sorted(
            (r for r in rows if r.ratio < p10 / 3 or r.ratio > p90 * 3),
            key=lambda r: -abs(r.ratio / centre - 1),
        )
    return RatioSummary(
        published=str(published),
        hardware=hardware,
        compared=len(rows),
        only_ours=only_ours,
        median=statistics.median(ratios) if ratios else None,
        p10=p10,
        p90=p90,
        minimum=ratios[0] if ratios else None,
        maximum=ratios[-1] if ratios else None,
        outliers=outliers,
        rows=sorted(rows, key=lambda r: r.task_id),
    )
