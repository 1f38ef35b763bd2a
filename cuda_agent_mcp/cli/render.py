"""Human-readable rendering of tool results for the terminal (the --json path prints the models as-is)."""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from cuda_agent_mcp.cli.tables import Column, print_fields, print_panel, print_table
from cuda_agent_mcp.results import BuildResult, Diagnostic, ProfileResult, Verdict, VerifyResult
from cuda_agent_mcp.tasks.fetch import KernelBenchFetch
from cuda_agent_mcp.tools import SourceAuditResult, TaskAuditResult, TaskDetails, TaskList, WorkspaceInfo
from cuda_agent_mcp.tools.journal import JournalListing


def task_table(listing: TaskList, console: Console) -> None:
    rows = [
        [
            escape(task.id),
            escape(task.name),
            str(task.level) if task.level is not None else "-",
            task.dtype,
            task.content_hash[:12],
        ]
        for task in listing.tasks
    ]
    columns = [
        Column("id", keep=True),
        Column("name"),
        Column("level"),
        Column("dtype"),
        Column("hash", keep=True),
    ]
    print_table(console, columns, rows, title=f"{len(listing.tasks)} of {listing.total} tasks")


def task_details(details: TaskDetails, console: Console, *, show_code: bool) -> None:
    task = details.task
    source = f"{task.source.kind}: {task.source.path or '-'}" + (
        f" row {task.source.row}" if task.source.row is not None else ""
    )
    fields = [
        ("id", escape(task.id)),
        ("name", escape(task.name)),
        ("level", str(task.level) if task.level is not None else "-"),
        ("source", escape(source)),
        ("hash", task.content_hash),
        ("dtype", task.policy.dtype),
        ("fast math", "on" if task.policy.use_fast_math else "off"),
    ]
    if details.probe is not None:
        inputs = ", ".join(
            f"{i.dtype}{list(i.shape or [])}" if i.kind == "tensor" else f"{i.kind}={i.value}"
            for i in details.probe.inputs
        )
        fields += [
            ("inputs", escape(inputs)),
            ("init inputs", escape(", ".join(details.probe.init_inputs) or "-")),
            ("parameters", str(details.probe.parameter_count)),
        ]
    if details.rules is not None:
        for statement in details.rules.statements:
            name, _, text = statement.partition(": ")
            fields.append((RULE_LABELS.get(name, name.lower()), escape(text)))
    print_fields(console, fields)
    if show_code:
        source_code(task.code, console)


def source_code(code: str, console: Console) -> None:
    """Every character of every line: wrapped under its line number on a terminal, as-is otherwise."""
    if console.is_terminal:
        console.print(Syntax(code, "python", line_numbers=True, word_wrap=True))
        return
    lines = code.rstrip("\n").splitlines()
    width = len(str(len(lines)))
    text = "\n".join(f"{n:>{width}}  {line}" for n, line in enumerate(lines, start=1))
    console.print(text, markup=False, highlight=False, soft_wrap=True, crop=False)


RULE_LABELS = {"Vendor libraries": "libraries"}


def task_audit(result: TaskAuditResult, console: Console) -> None:
    marks = {"passed": "[red]PASSED (bad)[/]", "failed": "[green]failed[/]", "unknown": "[yellow]unknown[/]"}
    rows = [
        [escape(c.name), marks[c.outcome], c.verdict_status, escape(c.reason)] for c in result.null_candidates
    ]
    columns = [
        Column("null candidate", keep=True),
        Column("outcome"),
        Column("verdict"),
        Column("why unknown"),
    ]
    print_table(console, columns, rows)
    verdict = {
        "weak": "[red]weak[/]: a candidate that does no work passes it",
        "sound": "[green]sound[/]: every null candidate was refused",
        "unknown": "[yellow]unknown[/]: some null candidates could not be judged, so nothing is known "
        "about them (see why; on the CPU, try --call-timeout or smaller sizes)",
    }[result.verdict]
    console.print(f"{escape(result.task_id)}: {verdict}", highlight=False, soft_wrap=True)


def source_audit(result: SourceAuditResult, console: Console) -> None:
    libraries = ", ".join(result.vendor_libraries) or "none"
    console.print(
        f"static audit of {escape(result.workspace)} ({escape(result.task_id)}; vendor libraries: {libraries})",
        highlight=False,
    )
    if result.clean:
        console.print(
            "[green]clean[/]: nothing forbidden found (verify also audits the ops ModelNew runs)",
            highlight=False,
        )
        return
    rows = [
        [escape(f"{f.file}:{f.line}" if f.line else f.file), escape(f.rule), escape(f.message)]
        for f in result.findings
    ]
    print_table(console, [Column("where", keep=True), Column("rule", keep=True), Column("finding")], rows)
    console.print(f"[red]{len(result.findings)} finding(s)[/]: verify would refuse this workspace")


def workspace_created(info: WorkspaceInfo) -> str:
    files = "\n".join(f"  {f}" for f in info.files)
    return (
        f"workspace for [bold]{escape(info.task_id)}[/] at {escape(info.path)}\n{escape(files)}\n"
        f"next: read SKILL.md, write the kernels, then cuda-agent compile {escape(info.path)}"
    )


def kernelbench_fetched(fetched: KernelBenchFetch) -> str:
    tree = escape(fetched.tasks_path)
    where = "already in" if fetched.method == "present" else f"downloaded ({fetched.method}) to"
    use = (
        "every command finds it there: cuda-agent tasks list --level 1"
        if fetched.found_by_default
        else f"use it with --tasks {tree} (or CUDA_AGENT_TASKS={tree})"
    )
    count = f"{fetched.tasks} task" + ("" if fetched.tasks == 1 else "s")
    return f"KernelBench ({count}) {where} {tree}\n{use}"


def build_report(result: BuildResult, console: Console) -> None:
    styles = {"compiled": "green", "cached": "dim", "failed": "red", "timed_out": "red"}
    print_table(
        console,
        [Column("file", keep=True), Column("action"), Column("seconds", justify="right")],
        [[escape(f.file), f"[{styles[f.action]}]{f.action}[/]", f"{f.wall_s:.2f}"] for f in result.files],
        title="files",
    )
    if result.kernels:
        print_table(
            console,
            [
                Column("kernel", keep=True),
                *(Column(h, justify="right") for h in ("regs", "smem B", "stack B", "spills B (st/ld)")),
            ],
            [
                [
                    escape(k.name),
                    str(k.registers),
                    str(k.shared_memory_bytes),
                    str(k.stack_frame_bytes),
                    f"{k.spill_stores_bytes}/{k.spill_loads_bytes}",
                ]
                for k in result.kernels
            ],
            # A Triton kernel's figures are its largest over the launches the build compiled.
            title="kernels (triton, largest over its launches)"
            if result.language == "triton"
            else "kernels (ptxas)",
        )
    for d in result.diagnostics:
        colour = {"error": "red", "warning": "yellow", "note": "blue"}[d.severity]
        console.print(f"[{colour}]{d.severity}[/] {escape(_where(d))}: {escape(d.message)}", soft_wrap=True)
    if result.ignored_protected_files:
        console.print(
            f"[yellow]ignored edits to protected files:[/] {', '.join(result.ignored_protected_files)}"
        )
    status = "[green]ok[/]" if result.ok else f"[red]failed ({result.failure})[/]"
    # The summary may end with a compiler's own words: it gets its line, the timing the next one.
    body = f"{status}: {escape(result.summary)}\n{result.wall_s:.2f} s, {result.arch}"
    if result.workspace_extension_path:
        body += f"\n{result.workspace_extension_path}"
    print_panel(console, "compile", body)


def verdict_report(title: str, verdict: Verdict, console: Console, *, extra: list[str]) -> None:
    """One panel: the verdict's status, what it says, and the tool's own lines."""
    colour = "green" if verdict.status == "passed" else "red"
    lines = [f"[{colour}]{verdict.status}[/]"]
    for field, value in verdict.model_dump(exclude={"status", "diagnostics"}).items():
        if any(line.startswith(f"{field}: ") for line in extra):
            continue  # the tool's own line says it (verify's "trials: 5 (normal, ...)")
        if value not in (None, "", [], {}):
            text = value if isinstance(value, str) else repr(value)
            lines.append(f"{field}: {escape(text[-1500:])}")
    # A compile failure's diagnostics as the compiler wrote them, one a line (not a list's repr).
    lines += [
        f"{d.severity} {escape(_where(d))}: {escape(d.message)}" for d in getattr(verdict, "diagnostics", [])
    ]
    print_panel(console, title, "\n".join(lines + extra))


def _where(d: Diagnostic) -> str:
    where = d.file or d.tool
    if d.line is not None:
        where += f":{d.line}" + (f":{d.column}" if d.column else "")
    return where


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


def journal_table(listing: JournalListing, console: Console) -> None:
    if not listing.records:
        console.print(f"journal: {escape(listing.path)}: no evaluations yet", highlight=False, soft_wrap=True)
        return
    rows = [
        [
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started_at)),
            record.kind,
            escape(record.task_id),
            record.status,
            record.verdict or (escape(record.error[:60]) if record.error else ""),
            record.source_hash[:12],
            escape(str(record.environment.get("gpu", ""))),
            record.rules_version or "?",  # written before verdicts were versioned
        ]
        for record in listing.records
    ]
    columns = [
        Column("started", keep=True), Column("kind"), Column("task", keep=True), Column("status"),
        Column("verdict"), Column("source", keep=True), Column("gpu"), Column("rules", keep=True),
    ]  # fmt: skip
    print_table(console, columns, rows, title=f"journal: {escape(listing.path)}")
