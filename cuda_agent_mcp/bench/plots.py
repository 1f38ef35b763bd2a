"""The report's figures as inline SVG, drawn with matplotlib (the `report` extra); without it, none."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cuda_agent_mcp.bench.metrics import fast_p, scored
from cuda_agent_mcp.bench.models import Baseline, GroupMetrics, TaskRow

if TYPE_CHECKING:  # matplotlib is the optional `report` extra, imported when a figure is drawn
    from matplotlib.figure import Figure

COLOURS = {"eager": "#4c72b0", "compile": "#dd8452", "pass": "#55a868", "fail": "#c44e52"}


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def figures(rows: Sequence[TaskRow], groups: Sequence[GroupMetrics]) -> list[tuple[str, str]]:
    """(title, svg) for each figure; empty when matplotlib is not installed."""
    if not available():
        return []
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                                "axes.spines.right": False})  # fmt: skip
    drawn = [
        ("Speedup distribution (correct tasks)", _speedups(rows)),
        ("fast_p over p", _fast_p_curve(rows)),
        ("Per level", _levels(groups)),
        ("Speedup vs fraction of speed of light", _sol_scatter(rows)),
        ("Why tasks failed", _failures(groups[0] if groups else None)),
    ]
    return [(title, _svg(figure, index)) for index, (title, figure) in enumerate(drawn)]


def _figure(width: float = 5.2, height: float = 3.2) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _empty(figure: Figure, text: str) -> Figure:
    axis = figure.add_subplot()
    axis.text(0.5, 0.5, text, ha="center", va="center", transform=axis.transAxes, color="#666")
    axis.set_axis_off()
    return figure


def _speedups(rows: Sequence[TaskRow]) -> Figure:
    figure = _figure()
    series = {
        b: [s for r in rows if r.outcome == "correct" and (s := r.speedup(b)) is not None] for b in _BASELINES
    }
    values = [v for s in series.values() for v in s]
    if not values:
        return _empty(figure, "no correct task with a speedup (not measured)")
    axis = figure.add_subplot()
    low, high = math.log2(min(values)), math.log2(max(values))
    low, high = min(low, -1.0), max(high, 1.0)
    bins = [low + (high - low) * i / 24 for i in range(25)]
    for baseline, data in series.items():
        if data:
            axis.hist([math.log2(v) for v in data], bins=bins, alpha=0.6, label=f"vs {baseline}",
                      color=COLOURS[baseline])  # fmt: skip
    axis.axvline(0, color="#333", linewidth=0.8)
    axis.set_xlabel("speedup (log2: 0 = as fast, 1 = twice as fast)")
    axis.set_ylabel("tasks")
    axis.legend(frameon=False)
    return figure


def _fast_p_curve(rows: Sequence[TaskRow]) -> Figure:
    figure = _figure()
    counted = scored(rows)
    if not counted:
        return _empty(figure, "no scored task")
    axis = figure.add_subplot()
    grid = [i / 50 for i in range(0, 151)]
    for baseline in _BASELINES:
        rates = [fast_p(counted, baseline, p).rate or 0.0 for p in grid]
        axis.plot(grid, rates, label=f"vs {baseline}", color=COLOURS[baseline])
        marks = (0.0, 1.0, 1.05, 1.5, 2.0)
        axis.scatter(
            marks, [fast_p(counted, baseline, p).rate or 0.0 for p in marks], s=12, color=COLOURS[baseline]
        )
    axis.set_xlabel("p (speedup threshold)")
    axis.set_ylabel("fast_p (share of scored tasks)")
    axis.set_ylim(0, 1.02)
    axis.legend(frameon=False)
    return figure


def _levels(groups: Sequence[GroupMetrics]) -> Figure:
    figure = _figure()
    shown = [g for g in groups if g.group != "overall"] or list(groups[:1])
    if not shown:
        return _empty(figure, "no rows")
    axis = figure.add_subplot()
    measures = [
        ("pass rate", lambda g: g.pass_rate or 0.0, COLOURS["pass"]),
        ("fast_1 vs eager", lambda g: g.eager.fast_p[1].rate or 0.0, COLOURS["eager"]),
        ("fast_1 vs compile", lambda g: g.compile.fast_p[1].rate or 0.0, COLOURS["compile"]),
    ]
    width = 0.8 / len(measures)
    for offset, (label, value, colour) in enumerate(measures):
        xs = [i + (offset - 1) * width for i in range(len(shown))]
        axis.bar(xs, [value(g) for g in shown], width=width, label=label, color=colour)
    axis.set_xticks(range(len(shown)), [g.group for g in shown])
    axis.set_ylim(0, 1.05)
    axis.set_ylabel("share of scored tasks")
    axis.legend(frameon=False, fontsize=8)
    return figure


def _sol_scatter(rows: Sequence[TaskRow]) -> Figure:
    figure = _figure()
    points = [
        (r.speed_of_light.fraction, r.speedup_vs_compile)
        for r in rows
        if r.outcome == "correct"
        and r.speed_of_light is not None
        and r.speed_of_light.fraction is not None
        and r.speedup_vs_compile is not None
    ]
    if not points:
        return _empty(figure, "speed of light: not measured")
    axis = figure.add_subplot()
    axis.scatter([p[0] for p in points], [p[1] for p in points], s=14, color=COLOURS["compile"])
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.axhline(1.0, color="#333", linewidth=0.8)
    axis.set_xlabel("fraction of speed of light (1 = at SOL)")
    axis.set_ylabel("speedup vs torch.compile")
    return figure


def _failures(overall: GroupMetrics | None) -> Figure:
    figure = _figure()
    if overall is None or not overall.failures:
        return _empty(figure, "no failures")
    axis = figure.add_subplot()
    items = list(reversed(overall.failures[:12]))
    axis.barh([i.key for i in items], [i.count for i in items], color=COLOURS["fail"])
    axis.set_xlabel("tasks")
    return figure


_BASELINES: tuple[Baseline, ...] = ("eager", "compile")


def _svg(figure: Figure, index: int) -> str:
    import matplotlib

    # Element ids must differ between the figures of one page.
    matplotlib.rcParams["svg.hashsalt"] = f"cuda-agent-figure-{index}"
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)  # RDF boilerplate, no figure
    return text[text.index("<svg") :]
