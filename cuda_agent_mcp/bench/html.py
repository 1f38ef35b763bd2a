"""The report page: one self-contained HTML file (inline CSS, SVG and a few lines of script; a content
security policy forbids every network fetch). Every text that came from a task or a candidate is escaped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from cuda_agent_mcp.bench.models import GroupMetrics, SuiteSummary, TaskRow

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#555;margin:0 0 12px}.banner{background:#fff4d6;border:1px solid #e6c35c;padding:6px 10px;margin:8px 0}
table{border-collapse:collapse;margin:6px 0 14px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
tr.task{cursor:pointer}tr.task:hover{background:#f6f9ff}tr.detail{display:none}tr.detail.open{display:table-row}
tr.detail td{text-align:left;background:#fbfbfb}pre{white-space:pre-wrap;font-size:12px;margin:4px 0}
.correct{color:#1b7f3b}.incorrect{color:#b3261e}.task_error,.infra_error{color:#8a6d00}
.figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:12px}
figure{margin:0;border:1px solid #eee;padding:6px}figcaption{font-weight:600;margin-bottom:4px}
figure svg{width:100%;height:auto}input{padding:3px 6px;margin:4px 0}
"""

_SCRIPT = """
document.querySelectorAll('tr.task').forEach(function (row) {
  row.addEventListener('click', function () {
    var detail = document.getElementById(row.dataset.detail);
    if (detail) { detail.classList.toggle('open'); }
  });
});
var filter = document.getElementById('filter');
if (filter) {
  filter.addEventListener('input', function () {
    var needle = filter.value.toLowerCase();
    document.querySelectorAll('tr.task').forEach(function (row) {
      row.style.display = row.textContent.toLowerCase().indexOf(needle) >= 0 ? '' : 'none';
    });
  });
}
"""


def page(
    summary: SuiteSummary, rows: Sequence[TaskRow], figures: Sequence[tuple[str, str]], plots_note: str
) -> str:
    env = summary.environment
    environment = ", ".join(
        f"{k} {escape(v)}" for k, v in env.items() if k in ("gpu", "driver_cuda", "cuda", "torch")
    )
    started = _when(summary.started_at)
    finished = _when(summary.finished_at) if summary.finished_at else "not finished"
    banner = (
        ""
        if summary.complete
        else '<p class="banner">Partial run: ' + escape(summary.notes[0] if summary.notes else "") + "</p>"
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">",
        f"<title>Suite run {escape(summary.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Suite run {escape(summary.run_id)}</h1>",
        f"<p class='meta'>rules <b>{escape(summary.rules)}</b> · device {escape(summary.device)} · "
        f"{escape(summary.solutions)} · {summary.measured} of {summary.selected} tasks · "
        f"{environment or 'environment not recorded'} · started {started}, finished {finished}</p>",
        banner,
        "<h2>Summary</h2>",
        _summary_table(summary.table_groups()),
        _weighted(summary.groups),
        "<h2>fast_p</h2>",
        _fast_p_table(summary.table_groups()),
    ]
    if summary.notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in summary.notes) + "</ul>")
    parts.append("<h2>Figures</h2>")
    if figures:
        parts.append(
            "<div class='figs'>"
            + "".join(f"<figure><figcaption>{escape(t)}</figcaption>{svg}</figure>" for t, svg in figures)
            + "</div>"
        )
    else:
        parts.append(f"<p>{escape(plots_note)}</p>")
    parts += [
        "<h2>Tasks</h2><p>Click a row for its verdicts, kernel breakdown and build.</p>",
        "<input id='filter' placeholder='filter rows' aria-label='filter rows'>",
        _task_table(rows),
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts)


def _when(stamp: float | None) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M UTC") if stamp else "-"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _summary_table(groups: Sequence[GroupMetrics]) -> str:
    head = (
        "<table id='summary'><tr><th class='l'>group</th><th>tasks</th><th>scored</th><th>correct</th>"
        "<th>pass rate</th><th>fast_1 eager</th><th>fast_1 compile</th><th>geomean vs eager</th>"
        "<th>geomean vs compile</th><th>geomean vs compile (failures 1x)</th><th>mean reward</th>"
        "<th>SOL fraction (median)</th><th>SOL score (mean)</th><th>task errors</th></tr>"
    )
    body = "".join(
        f"<tr><td class='l'>{escape(g.group)}</td><td>{g.tasks}</td><td>{g.scored}</td><td>{g.correct}</td>"
        f"<td>{_pct(g.pass_rate)}</td><td>{_pct(g.eager.fast_p[1].rate)}</td><td>{_pct(g.compile.fast_p[1].rate)}</td>"
        f"<td>{_x(g.eager.geomean_speedup)}</td><td>{_x(g.compile.geomean_speedup)}</td>"
        f"<td>{_x(g.compile.geomean_speedup_failures_as_1x)}</td><td>{_num(g.mean_reward)}</td>"
        f"<td>{_num(g.sol_fraction_median)}</td><td>{_num(g.sol_score_mean)}</td><td>{len(g.task_errors)}</td></tr>"
        for g in groups
    )
    return head + body + "</table>"


def _weighted(groups: Sequence[GroupMetrics]) -> str:
    """The CUDA Agent paper's overall geomean: the levels' geomeans weighted by their problem counts."""
    if not groups or groups[0].compile.geomean_speedup_level_weighted is None:
        return ""
    overall = groups[0]
    return (
        f"<p>Overall geomean weighted by level (the CUDA Agent paper's figure): vs eager "
        f"{_x(overall.eager.geomean_speedup_level_weighted)}, vs compile "
        f"{_x(overall.compile.geomean_speedup_level_weighted)}.</p>"
    )


def _fast_p_table(groups: Sequence[GroupMetrics]) -> str:
    ps = [f.p for f in groups[0].eager.fast_p] if groups else []
    head = "<table id='fast-p'><tr><th class='l'>group</th><th class='l'>baseline</th>" + "".join(
        f"<th>fast_{p:g}</th>" for p in ps
    )
    rows = []
    for g in groups:
        for metrics in (g.eager, g.compile):
            cells = "".join(f"<td>{_pct(f.rate)} ({f.count})</td>" for f in metrics.fast_p)
            rows.append(
                f"<tr><td class='l'>{escape(g.group)}</td><td class='l'>{metrics.baseline}</td>{cells}</tr>"
            )
    failures = ""
    if groups and groups[0].failures:
        failures = (
            "<p>Failures: " + ", ".join(f"{escape(c.key)} {c.count}" for c in groups[0].failures) + "</p>"
        )
    errors = ""
    if groups and groups[0].task_errors:
        errors = "<p>Task errors (left out): " + ", ".join(escape(t) for t in groups[0].task_errors) + "</p>"
    return head + "</tr>" + "".join(rows) + "</table>" + failures + errors


def _interval(row: TaskRow, baseline: str) -> str:
    speedup = row.speedup_vs_eager if baseline == "eager" else row.speedup_vs_compile
    interval = row.speedup_vs_eager_ci if baseline == "eager" else row.speedup_vs_compile_ci
    if speedup is None:
        return "-"
    return _x(speedup) + (f" [{interval.low:.2f}, {interval.high:.2f}]" if interval else "")


def _task_table(rows: Sequence[TaskRow]) -> str:
    head = (
        "<table id='tasks'><tr><th class='l'>task</th><th>level</th><th class='l'>language</th><th class='l'>outcome</th>"
        "<th class='l'>failure</th><th>kernel ms</th><th>vs eager [CI]</th><th>vs compile [CI]</th>"
        "<th>SOL fraction</th><th>reward</th></tr>"
    )
    body = []
    for index, row in enumerate(rows):
        sol = row.speed_of_light.fraction if row.speed_of_light else None
        body.append(
            f"<tr class='task' data-detail='detail-{index}'><td class='l'>{escape(row.task_id)}</td>"
            f"<td>{row.level if row.level is not None else '-'}</td><td class='l'>{escape(row.language)}</td>"
            f"<td class='l {row.outcome}'>{row.outcome}</td><td class='l'>{escape(row.failure or '')}</td>"
            f"<td>{_num(row.candidate_ms, 4)}</td><td>{_interval(row, 'eager')}</td>"
            f"<td>{_interval(row, 'compile')}</td><td>{_num(sol)}</td><td>{_num(row.reward)}</td></tr>"
            f"<tr class='detail' id='detail-{index}'><td colspan='10'>{_detail(row)}</td></tr>"
        )
    return head + "".join(body) + "</table>"


def _detail(row: TaskRow) -> str:
    parts = [f"<p><b>{escape(row.name)}</b> · solution {escape(row.solution or 'none')}"]
    if row.message:
        parts.append(f"<br>{escape(row.message)}")
    parts.append("</p>")
    times = [("kernel", row.candidate_ms), ("eager", row.eager_ms), ("torch.compile", row.compile_ms)]
    parts.append("<p>median ms: " + ", ".join(f"{n} {_num(v, 4)}" for n, v in times) + "</p>")
    flags = [f for f, on in (("low confidence", row.low_confidence), ("within noise", row.within_noise),
                             ("faster than SOL", row.faster_than_sol)) if on]  # fmt: skip
    if flags or row.evidence_missing:
        parts.append(
            "<p>flags: " + escape(", ".join(flags + [f"missing {e}" for e in row.evidence_missing])) + "</p>"
        )
    if row.speed_of_light is not None:
        sol = row.speed_of_light
        parts.append(
            f"<p>speed of light: {sol.t_sol_ms:.4g} ms ({sol.bound}-bound, {sol.bytes_moved} bytes, {sol.flops} FLOPs), "
            f"fraction {_num(sol.fraction)}, SOL score {_num(sol.score)}</p>"
        )
    if row.kernels is not None and row.kernels.kernels:
        parts.append(
            "<table><tr><th class='l'>kernel</th><th>calls</th><th>ms</th><th class='l'>origin</th></tr>"
        )
        parts += [
            f"<tr><td class='l'>{escape(k.name[:160])}</td><td>{k.calls}</td><td>{k.total_ms:.4g}</td>"
            f"<td class='l'>{k.origin}</td></tr>"
            for k in row.kernels.kernels
        ]
        parts.append("</table>")
    if row.build is not None:
        b = row.build
        parts.append(
            f"<p>build: {escape(b.summary)} · {b.files} files, {b.compiled} compiled, {b.wall_s:.1f} s, "
            f"{b.errors} errors, {b.warnings} warnings</p>"
        )
        if b.kernels:
            parts.append(
                "<table><tr><th class='l'>kernel (ptxas)</th><th>registers</th><th>smem B</th><th>spills B</th></tr>"
            )
            parts += [
                f"<tr><td class='l'>{escape(k.name[:160])}</td><td>{k.registers}</td><td>{k.shared_memory_bytes}</td>"
                f"<td>{k.spill_stores_bytes + k.spill_loads_bytes}</td></tr>"
                for k in b.kernels
            ]
            parts.append("</table>")
    verdicts = (
        ("baseline", row.baseline_verdict),
        ("verify", row.verify_verdict),
        ("profile", row.profile_verdict),
    )
    for title, verdict in verdicts:
        if verdict is not None:
            text = json.dumps(verdict.model_dump(mode="json"), indent=1)[:6000]
            parts.append(
                f"<details><summary>{title} verdict: {verdict.status}</summary><pre>{escape(text)}</pre></details>"
            )
    if row.journal_record:
        parts.append(f"<p>journal record {escape(row.journal_record)}</p>")
    return "".join(parts)
