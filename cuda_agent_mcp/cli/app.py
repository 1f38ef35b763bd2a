"""The `cuda-agent` command line: tasks, workspaces and builds, readable by default, --json for scripts."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from cuda_agent_mcp.build import BuildProgress, default_cache_dir
from cuda_agent_mcp.cli import render
from cuda_agent_mcp.cli.agent_commands import optimize_command, policy_app, trajectories_app
from cuda_agent_mcp.cli.bench_commands import bench_app
from cuda_agent_mcp.cli.common import emit_json as _emit_json
from cuda_agent_mcp.cli.common import err, out
from cuda_agent_mcp.cli.common import run as _run
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.results import ProfileResult, VerifyResult
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import (
    CompileRequest,
    EvaluateRequest,
    ProfileRequest,
    Session,
    TaskAuditRequest,
    TaskAuditResult,
    TaskQuery,
    VerifyRequest,
    audit_task,
    compile_kernels,
    evaluate_kernels,
    list_tasks,
    new_workspace,
    profile_kernels,
    show_task,
    verify_kernels,
)
from cuda_agent_mcp.tools.gpu import visible_gpu_scheduler
from cuda_agent_mcp.tools.journal import JournalListing, open_journal

app = typer.Typer(help="Write, build and evaluate CUDA kernels for PyTorch references.", no_args_is_help=True)
tasks_app = typer.Typer(help="List and inspect tasks.", no_args_is_help=True)
workspace_app = typer.Typer(help="Create agent workspaces.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
app.add_typer(workspace_app, name="workspace")
app.add_typer(policy_app, name="policy")
app.add_typer(trajectories_app, name="trajectories")
app.add_typer(bench_app, name="bench")
app.command("optimize")(optimize_command)

T = TypeVar("T")

TasksOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--tasks", "-t", help="task source: a .py file, a KernelBench tree, a .jsonl/.parquet dataset"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print the result as JSON")]


def _catalog(sources: list[Path] | None) -> TaskCatalog:
    return TaskCatalog.from_environment(sources or [])


@tasks_app.command("list")
def tasks_list(
    tasks: TasksOption = None,
    level: Annotated[int | None, typer.Option(help="only this level")] = None,
    contains: Annotated[str | None, typer.Option(help="substring of the id or name")] = None,
    limit: Annotated[int | None, typer.Option(help="show at most this many")] = None,
    json: JsonOption = False,
) -> None:
    """List the tasks of the bundled examples and of every --tasks source."""
    catalog = _catalog(tasks)
    listing = _run(lambda: list_tasks(catalog, TaskQuery(level=level, contains=contains, limit=limit)))
    _emit_json(listing) if json else out.print(render.task_table(listing))


@tasks_app.command("show")
def tasks_show(
    task: Annotated[str, typer.Argument(help="task id (see tasks list) or a .py file")],
    tasks: TasksOption = None,
    code: Annotated[bool, typer.Option("--code/--no-code", help="print the reference source")] = True,
    inspect: Annotated[
        bool, typer.Option("--inspect/--no-inspect", help="run the entry points on the meta device")
    ] = True,
    json: JsonOption = False,
) -> None:
    """Show one task: metadata, input shapes, reference source."""
    catalog = _catalog(tasks)
    with err.status("inspecting the task", spinner="dots") if inspect and not json else nullcontext():
        details = _run(lambda: show_task(catalog, task, inspect=inspect))
    _emit_json(details) if json else out.print(render.task_details(details, show_code=code))


@tasks_app.command("audit")
def tasks_audit(
    task: Annotated[str, typer.Argument(help="task id or a .py file")],
    tasks: TasksOption = None,
    device: Annotated[str, typer.Option(help="cuda, or cpu")] = "cuda",
    json: JsonOption = False,
) -> None:
    """Check that candidates doing no real work (zeros, a constant, the input, noise) fail the task."""
    catalog = _catalog(tasks)

    async def work() -> TaskAuditResult:
        with tempfile.TemporaryDirectory(prefix="cuda-agent-audit-") as tmp:
            session = Session.create(catalog.get(task), Path(tmp) / "ws")
            return await audit_task(session, TaskAuditRequest(device=device))  # type: ignore[arg-type]

    result = _run_validated(work)
    if json:
        _emit_json(result)
    else:
        for candidate in result.null_candidates:
            mark = "[red]PASSED (bad)[/]" if candidate.passed else "[green]failed[/]"
            out.print(f"{candidate.name:14} {mark} ({candidate.verdict_status})")
        out.print(f"{result.task_id}: {'[red]weak[/]' if result.weak else '[green]sound[/]'}")
    if result.weak:
        raise typer.Exit(1)


@workspace_app.command("new")
def workspace_new(
    task: Annotated[str, typer.Argument(help="task id or a .py file")],
    directory: Annotated[Path, typer.Argument(help="where to lay the workspace out")],
    tasks: TasksOption = None,
    overwrite: Annotated[bool, typer.Option(help="lay out even if the directory is not empty")] = False,
    json: JsonOption = False,
) -> None:
    """Create a workspace for a task: model.py, model_new.py skeleton, kernels/, harness files."""
    catalog = _catalog(tasks)
    info = _run(lambda: new_workspace(catalog, task, directory, overwrite=overwrite))
    _emit_json(info) if json else out.print(render.workspace_created(info))


@app.command("compile")
def compile_command(
    directory: Annotated[Path, typer.Argument(help="workspace directory")] = Path("."),
    arch: Annotated[
        str | None, typer.Option(help="GPU target, e.g. sm_90 (default: this GPU, else sm_90)")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Build the workspace's kernels into cuda_extension.so (incremental). Exit 1 when the build fails."""

    async def work() -> object:
        session = Session.open(directory)
        request = CompileRequest(arch=arch)
        if json:
            return await compile_kernels(session, request)
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err, transient=True,
        ) as bar:  # fmt: skip
            job = bar.add_task("planning", total=None)

            def on_progress(event: BuildProgress) -> None:
                bar.update(job, description=event.message, completed=event.done, total=event.total or None)

            return await compile_kernels(session, request, progress=on_progress)

    try:
        result = _run(work)
    except ValueError as exc:  # pydantic rejects a malformed --arch before anything runs
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    _emit_json(result) if json else render.build_report(result, out)  # type: ignore[arg-type]
    if not result.ok:  # type: ignore[attr-defined]
        raise typer.Exit(1)


DirectoryArgument = Annotated[Path, typer.Argument(help="workspace directory")]
DeviceOption = Annotated[str, typer.Option(help="cuda, or cpu for pure-PyTorch candidates")]
AuditOption = Annotated[
    bool,
    typer.Option("--audit/--no-audit", help="refuse PyTorch compute in ModelNew (static and at run time)"),
]


@app.command("verify")
def verify_command(
    directory: DirectoryArgument = Path("."),
    trials: Annotated[int, typer.Option(help="input sets, each from a fresh secret seed")] = 5,
    strict: Annotated[bool, typer.Option(help="fp32 tolerance 1e-4 instead of 1e-2")] = False,
    device: DeviceOption = "cuda",
    audit: AuditOption = True,
    json: JsonOption = False,
) -> None:
    """Build, then check ModelNew against Model in a separate worker process. Exit 1 unless it passes."""
    request = VerifyRequest(trials=trials, strict=strict, device=device, audit=audit)  # type: ignore[arg-type]
    result = _run_validated(lambda: verify_kernels(Session.open(directory), request))
    _finish("verify", result, render.verify_lines(result), as_json=json)


@app.command("profile")
def profile_command(
    directory: DirectoryArgument = Path("."),
    baselines: Annotated[str, typer.Option(help="cached, measure or skip")] = "cached",
    device: DeviceOption = "cuda",
    json: JsonOption = False,
) -> None:
    """Build, then time ModelNew, PyTorch eager and torch.compile. Exit 1 unless timing succeeded."""
    result = _run_validated(
        lambda: profile_kernels(Session.open(directory), ProfileRequest(baselines=baselines, device=device))  # type: ignore[arg-type]
    )
    _finish("profile", result, render.profile_lines(result), as_json=json)


@app.command("eval")
def eval_command(
    directory: DirectoryArgument = Path("."),
    device: DeviceOption = "cuda",
    audit: AuditOption = True,
    json: JsonOption = False,
) -> None:
    """verify + profile + reward (the paper's milestones: -1, 1, 2, 3)."""
    request = EvaluateRequest(
        verify=VerifyRequest(device=device, audit=audit),  # type: ignore[arg-type]
        profile=ProfileRequest(device=device),  # type: ignore[arg-type]
    )
    result = _run_validated(lambda: evaluate_kernels(Session.open(directory), request))
    if json:
        _emit_json(result)
    else:
        render.verdict_report("verify", result.verify.verdict, out, extra=render.verify_lines(result.verify))
        if result.profile is not None:
            render.verdict_report(
                "profile", result.profile.verdict, out, extra=render.profile_lines(result.profile)
            )
        out.print(f"reward ({result.reward_schedule}): [bold]{result.reward:g}[/]")
    if result.reward < 0:
        raise typer.Exit(1)


@app.command("serve")
def serve_command(
    http: Annotated[
        str | None, typer.Option("--http", help="serve streamable HTTP on HOST:PORT instead of stdio")
    ] = None,
    tokens_file: Annotated[
        Path | None,
        typer.Option(help="HTTP bearer tokens, one 'CLIENT_ID TOKEN' per line (else $CUDA_AGENT_MCP_TOKEN)"),
    ] = None,
    insecure_local: Annotated[
        bool, typer.Option("--insecure-local", help="allow HTTP without tokens, on 127.0.0.1 only")
    ] = False,
    root: Annotated[Path | None, typer.Option(help="where session workspaces are created")] = None,
    tasks: TasksOption = None,
    tool_budget: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="seconds a compile/verify/profile/evaluate call may take before it answers with a job "
            "handle for wait_job (keep it under your host's tool timeout)",
        ),
    ] = 50.0,
) -> None:
    """Run the MCP server (stdio by default): every tool, for IDE assistants and remote agents."""
    try:
        from cuda_agent_mcp.server.app import build_server
        from cuda_agent_mcp.server.auth import StaticTokens
        from cuda_agent_mcp.server.jobs import JobBoard
        from cuda_agent_mcp.server.sessions import SessionRegistry
    except ImportError as exc:
        err.print(
            f"[red]error:[/] the MCP server needs the mcp extra: pip install 'cuda-agent-mcp[mcp]' ({exc})"
        )
        raise typer.Exit(3) from None
    registry = SessionRegistry(
        root or default_cache_dir() / "sessions", _catalog(tasks), scheduler=visible_gpu_scheduler()
    )
    jobs = JobBoard(budget_s=tool_budget)
    if http is None:
        build_server(registry, jobs=jobs).run()  # stdout is the protocol from here on
        return
    host, _, port = http.rpartition(":")
    if not host or not port.isdigit():
        err.print("[red]error:[/] --http wants HOST:PORT, e.g. 127.0.0.1:8765")
        raise typer.Exit(2)
    try:
        tokens = StaticTokens.load(tokens_file)
    except (OSError, CudaAgentError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if tokens is None and not (insecure_local and host in ("127.0.0.1", "localhost")):
        err.print(
            "[red]error:[/] HTTP needs bearer tokens (--tokens-file or $CUDA_AGENT_MCP_TOKEN); "
            "--insecure-local serves without them, on 127.0.0.1 only"
        )
        raise typer.Exit(2)
    server = build_server(registry, tokens=tokens, url=f"http://{host}:{port}", jobs=jobs)
    server.run(transport="streamable-http", host=host, port=int(port))


@app.command("journal")
def journal_command(
    limit: Annotated[int, typer.Option(help="show at most this many, newest first")] = 20,
    json: JsonOption = False,
) -> None:
    """Recent evaluations from the journal: every verify, profile and eval result, kept across restarts
    (interrupted ones included)."""
    path = default_cache_dir() / "journal.sqlite"
    listing = JournalListing(path=str(path), records=open_journal(path).records(limit=limit))
    _emit_json(listing) if json else out.print(render.journal_table(listing))


def _finish(title: str, result: VerifyResult | ProfileResult, lines: list[str], *, as_json: bool) -> None:
    """Print a verify or profile result; exit 1 unless its verdict passed."""
    _emit_json(result) if as_json else render.verdict_report(title, result.verdict, out, extra=lines)
    if result.verdict.status != "passed":
        raise typer.Exit(1)


def _run_validated(work: Callable[[], Awaitable[T]]) -> T:
    try:
        return _run(work)
    except ValueError as exc:  # a request model refused an option before anything ran
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
