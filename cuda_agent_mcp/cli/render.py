"""Human-readable rendering of tool results for the terminal (the --json path prints the models as-is)."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from cuda_agent_mcp.results import BuildResult, ProfileResult, Verdict, VerifyResult
from cuda_agent_mcp.tools import TaskDetails, TaskList, WorkspaceInfo
from cuda_agent_mcp.tools.journal import JournalListing


def task_table(listing: TaskList) -> Table:
    table = Table(title=f"{len(listing.tasks)} of {listing.total} tasks", title_justify="left")
    for column in ("id", "name", "level", "dtype", "hash"):
        table.add_column(column)
    for task in listing.tasks:
        level = str(task.level) if task.level is not None else "-"
        table.add_row(task.id, escape(task.name), level, task.dtype, task.content_hash[:12])
    return table


def task_details(details: TaskDetails, *, show_code: bool) -> Group:
    task = details.task
    rows = Table.grid(padding=(0, 2))
    rows.add_row("id", task.id)
    rows.add_row("name", escape(task.name))
    rows.add_row("level", str(task.level) if task.level is not None else "-")
    rows.add_row(
        "source",
        f"{task.source.kind}: {task.source.path or '-'}"
        + (f" row {task.source.row}" if task.source.row is not None else ""),
    )
    rows.add_row("content hash", task.content_hash)
    rows.add_row(
        "dtype / tolerance",
        f"{task.policy.dtype} / atol={task.policy.tolerance.atol} rtol={task.policy.tolerance.rtol}",
    )
    rows.add_row("fast math", "on" if task.policy.use_fast_math else "off")
    if details.probe is not None:
        inputs = ", ".join(
            f"{i.dtype}{list(i.shape or [])}" if i.kind == "tensor" else f"{i.kind}={i.value}"
            for i in details.probe.inputs
        )
        rows.add_row("inputs", inputs)
        rows.add_row("init inputs", ", ".join(details.probe.init_inputs) or "-")
        rows.add_row("parameters", str(details.probe.parameter_count))
    parts: list[object] = [rows]
    if show_code:
        parts.append(Syntax(task.code, "python", line_numbers=True))
    return Group(*parts)  # type: ignore[arg-type]


def workspace_created(info: WorkspaceInfo) -> str:
    files = "\n".join(f"  {f}" for f in info.files)
    return (
        f"workspace for [bold]{info.task_id}[/] at {info.path}\n{files}\nnext: cuda-agent compile {info.path}"
    )


def build_report(result: BuildResult, console: Console) -> None:
    files = Table(title="files", title_justify="left")
    for column in ("file", "action", "seconds"):
        files.add_column(column)
    for item in result.files:
        style = {"compiled": "green", "cached": "dim", "failed": "red", "timed_out": "red"}[item.action]
        files.add_row(item.file, f"[{style}]{item.action}[/]", f"{item.wall_s:.2f}")
    console.print(files)
    if result.kernels:
        kernels = Table(title="kernels (ptxas)", title_justify="left")
        for column in ("kernel", "regs", "smem B", "stack B", "spills B (st/ld)"):
            kernels.add_column(column)
        for k in result.kernels:
            spills = f"{k.spill_stores_bytes}/{k.spill_loads_bytes}"
            kernels.add_row(
                escape(k.name), str(k.registers), str(k.shared_memory_bytes), str(k.stack_frame_bytes), spills
            )
        console.print(kernels)
    for d in result.diagnostics:
        where = d.file or d.tool
        if d.line is not None:
            where += f":{d.line}" + (f":{d.column}" if d.column else "")
        colour = {"error": "red", "warning": "yellow", "note": "blue"}[d.severity]
        console.print(f"[{colour}]{d.severity}[/] {escape(where)}: {escape(d.message)}")
    if result.ignored_protected_files:
        console.print(
            f"[yellow]ignored edits to protected files:[/] {', '.join(result.ignored_protected_files)}"
        )
    status = "[green]ok[/]" if result.ok else f"[red]failed ({result.failure})[/]"
    body = f"{status} {escape(result.summary)} in {result.wall_s:.2f} s, {result.arch}"
    if result.workspace_extension_path:
        body += f"\n{result.workspace_extension_path}"
    console.print(Panel(body, title="compile", title_align="left"))


def verdict_report(title: str, verdict: Verdict, console: Console, *, extra: list[str]) -> None:
    """One panel: the verdict's status, what it says, and the tool's own lines."""
    colour = "green" if verdict.status == "passed" else "red"
    lines = [f"[{colour}]{verdict.status}[/]"]
    for field, value in verdict.model_dump(exclude={"status"}).items():
        if value not in (None, "", [], {}):
            text = value if isinstance(value, str) else repr(value)
            lines.append(f"{field}: {escape(text[-1500:])}")
    console.print(Panel("\n".join(lines + extra), title=title, title_align="left"))


def verify_lines(result: VerifyResult) -> list[str]:
    return [f"trials: {result.trials} ({', '.join(result.distributions)})", f"wall: {result.wall_s:.2f} s"]


def profile_lines(result: ProfileResult) -> list[str]:
    lines = []
    for label, stats in (
        ("ModelNew", result.candidate),
        ("eager", result.eager),
        ("torch.compile", result.compiled),
    ):
        if stats is not None:
            lines.append(
                f"{label}: median {stats.median_ms:.4f} ms, cv {stats.cv:.3f}, {stats.samples} samples"
            )
    if result.speedup_vs_eager is not None and result.speedup_vs_compile is not None:
        lines.append(
            f"speedup: {result.speedup_vs_eager:.3f}x vs eager, {result.speedup_vs_compile:.3f}x vs compile"
        )
    if result.kernels is not None:
        share = result.kernels.workspace_share
        lines.append(
            f"kernels (one traced call, {result.kernels.traced_ms:.4f} ms on the device"
            + (f", {share:.0%} in workspace kernels):" if share is not None else "):")
        )
        lines += [
            f"  {k.total_ms:.4f} ms  x{k.calls}  {k.origin:<9}  {k.name[:100]}"
            for k in result.kernels.kernels[:8]
        ]
        if result.kernels.note:
            lines.append(f"  {result.kernels.note}")
    lines.append(
        f"gpu: {result.gpu}; baselines {'cached' if result.baselines_cached else 'measured'}; wall {result.wall_s:.2f} s"
    )
    return lines


def journal_table(listing: JournalListing) -> Table:
    table = Table(title=f"journal: {escape(listing.path)}")
    for column in ("started", "kind", "task", "status", "verdict", "source", "gpu"):
        table.add_column(column)
    for record in listing.records:
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started_at)),
            record.kind,
            escape(record.task_id),
            record.status,
            record.verdict or (escape(record.error[:60]) if record.error else ""),
            record.source_hash[:12],
            escape(str(record.environment.get("gpu", ""))),
        )
    return table
