"""The `cuda-agent` command line: tasks, workspaces and builds, readable by default, --json for scripts."""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column

from cuda_agent_mcp.build import BuildProgress, default_cache_dir
from cuda_agent_mcp.build.flags import check_arch
from cuda_agent_mcp.cli import render
from cuda_agent_mcp.cli.agent_commands import optimize_command, policy_app, trajectories_app
from cuda_agent_mcp.cli.bench_commands import bench_app
from cuda_agent_mcp.cli.common import (
    ErrorDetails,
    ErrorOutput,
    err,
    fail,
    guarded,
    help_markup,
    internal_error,
    out,
    wants_json,
)
from cuda_agent_mcp.cli.common import emit_json as _emit_json
from cuda_agent_mcp.cli.common import run as _run
from cuda_agent_mcp.cli.judge_commands import judges_app
from cuda_agent_mcp.cli.options import (
    AuditOption,
    BaselinesOption,
    BudgetOption,
    CallTimeoutOption,
    DeviceOption,
    LanguageChoice,
    LanguageOption,
    PrecisionCheckOption,
    StrictOption,
    TorchGlueOption,
    TrialsOption,
)
from cuda_agent_mcp.cli.progress import Step, step
from cuda_agent_mcp.cli.synth_commands import synthesize_command
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.evaluation.judge_client import want_service_started
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.executors.sandboxed import REDUCED_ISOLATION_ENV
from cuda_agent_mcp.results import BuildResult, ProfileResult, VerifyResult
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tasks.fetch import fetch_kernelbench
from cuda_agent_mcp.tools import (
    CompileRequest,
    EvaluateRequest,
    ProfileRequest,
    Session,
    SourceAuditResult,
    TaskAuditRequest,
    TaskAuditResult,
    TaskQuery,
    VerifyRequest,
    audit_sources,
    audit_task,
    compile_kernels,
    evaluate_kernels,
    list_tasks,
    new_workspace,
    profile_kernels,
    show_task,
    verify_kernels,
)
from cuda_agent_mcp.tools.cpu_path import check_cpu_candidate
from cuda_agent_mcp.tools.gpu import visible_gpu_scheduler
from cuda_agent_mcp.tools.journal import (
    JournalListing,
    default_journal_path,
    legacy_journal_path,
    open_journal,
)

app = typer.Typer(
    help="Write, build and evaluate CUDA kernels for PyTorch references.",
    no_args_is_help=True,
    rich_markup_mode=help_markup(),
)
tasks_app = typer.Typer(help="List and inspect tasks.", no_args_is_help=True, rich_markup_mode=help_markup())
workspace_app = typer.Typer(
    help="Create agent workspaces.", no_args_is_help=True, rich_markup_mode=help_markup()
)
app.add_typer(tasks_app, name="tasks")
app.add_typer(workspace_app, name="workspace")
app.add_typer(policy_app, name="policy")
app.add_typer(trajectories_app, name="trajectories")
app.add_typer(bench_app, name="bench")
app.add_typer(judges_app, name="judges")
app.command("optimize", short_help="Run the agent loop: a policy over the OpenAI wire format (GPU).")(
    optimize_command
)


TasksOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--tasks", "-t", help="task source: a .py file, a KernelBench tree, a .jsonl/.parquet dataset"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print the result as JSON")]


def _catalog(sources: list[Path] | None) -> TaskCatalog:
    return TaskCatalog.from_environment(sources or [])


@tasks_app.command("list", short_help="The tasks of the bundled examples and of every --tasks source.")
def tasks_list(
    tasks: TasksOption = None,
    level: Annotated[int | None, typer.Option(help="only this level")] = None,
    contains: Annotated[str | None, typer.Option(help="substring of the id or name")] = None,
    limit: Annotated[int | None, typer.Option(help="show at most this many")] = None,
    json: JsonOption = False,
) -> None:
    """List the tasks of the bundled examples and of every --tasks source."""
    catalog = guarded(_catalog, tasks, as_json=json)
    query = guarded(TaskQuery, level=level, contains=contains, limit=limit, as_json=json)
    listing = _run(lambda: list_tasks(catalog, query), as_json=json)
    _emit_json(listing) if json else render.task_table(listing, out)


@tasks_app.command("show", short_help="One task: metadata, inputs, rules, reference source.")
def tasks_show(
    task: Annotated[str, typer.Argument(help="task id (see tasks list) or a .py file")],
    tasks: TasksOption = None,
    code: Annotated[bool, typer.Option("--code/--no-code", help="print the reference source")] = True,
    inspect: Annotated[
        bool, typer.Option("--inspect/--no-inspect", help="run the entry points on the meta device")
    ] = True,
    json: JsonOption = False,
) -> None:
    """Show one task: metadata, input shapes, what a candidate must satisfy (tolerance, precision, the
    hidden-size plan), reference source."""
    catalog = guarded(_catalog, tasks, as_json=json)
    doing = (
        f"inspecting {task} (its entry points run on meta in a child process)" if inspect else "loading tasks"
    )
    with step(doing, quiet=json):
        details = _run(lambda: show_task(catalog, task, inspect=inspect), as_json=json)
    _emit_json(details) if json else render.task_details(details, out, show_code=code)


@tasks_app.command("audit", short_help="Do null candidates (zeros, noise, the input) fail the task? (GPU)")
def tasks_audit(
    task: Annotated[str, typer.Argument(help="task id or a .py file")],
    tasks: TasksOption = None,
    device: Annotated[str, typer.Option(help="cuda (needs a GPU), or cpu")] = "cuda",
    trials: Annotated[int, typer.Option(help="input sets per null candidate")] = 3,
    call_timeout: Annotated[
        float, typer.Option(help="seconds one forward() may take (the reference's own time included)")
    ] = 30.0,
    json: JsonOption = False,
) -> None:
    """Check that candidates doing no real work (zeros, a constant, the input, noise) fail the task.
    Exit 0 sound, 1 weak, 3 unknown (a null candidate could not be judged: a crash or a timeout says
    nothing about the task)."""
    catalog = guarded(_catalog, tasks, as_json=json)
    request = guarded(
        TaskAuditRequest, device=device, trials=trials, call_timeout_s=call_timeout, as_json=json
    )

    async def work() -> TaskAuditResult:
        with tempfile.TemporaryDirectory(prefix="cuda-agent-audit-") as tmp:
            session = Session.create(catalog.get(task), Path(tmp) / "ws")
            return await audit_task(session, request, progress=shown.update)

    with step(f"auditing {task}", quiet=json) as shown:
        result = _run(work, as_json=json)
    if json:
        _emit_json(result)
    else:
        render.task_audit(result, out)
    if result.verdict == "weak":
        raise typer.Exit(1)
    if result.verdict == "unknown":
        raise typer.Exit(3)


tasks_app.command(
    "synthesize", short_help="Compose tasks from seed operators, filter them, write a dataset."
)(synthesize_command)


@tasks_app.command("fetch", short_help="Download KernelBench's problems (git clone, else the tarball).")
def tasks_fetch(
    dest: Annotated[
        Path | None,
        typer.Option(help="where the repository goes (default: KernelBench under the cache directory)"),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Download KernelBench (github.com/ScalingIntelligence/KernelBench) with a shallow git clone, else its tarball. In the default
    place every command finds its tasks (ids like kernelbench/level1/19) without --tasks; elsewhere, pass
    --tasks DEST/KernelBench. Nothing is downloaded when it is already there."""
    with step("downloading KernelBench (git clone --depth 1, else the tarball)", quiet=json):
        fetched = guarded(fetch_kernelbench, dest, as_json=json)
    _emit_json(fetched) if json else out.print(
        render.kernelbench_fetched(fetched), highlight=False, soft_wrap=True
    )


@app.command("audit", short_help="Static audit of a workspace's sources (no build, no GPU).")
def audit_command(
    directory: Annotated[Path, typer.Argument(help="workspace directory")] = Path("."),
    json: JsonOption = False,
) -> None:
    """The static audit of a workspace's sources (PyTorch compute in ModelNew or in C++, reference
    imports, forbidden libraries), without a build or a GPU. Exit 1 when it finds something."""
    result: SourceAuditResult = _run(lambda: audit_sources(Session.open(directory)), as_json=json)
    _emit_json(result) if json else render.source_audit(result, out)
    if not result.clean:
        raise typer.Exit(1)


@workspace_app.command("new", short_help="Lay out a workspace for a task (model.py, skeleton, SKILL.md).")
def workspace_new(
    task: Annotated[str, typer.Argument(help="task id or a .py file")],
    directory: Annotated[Path, typer.Argument(help="where to lay the workspace out")],
    tasks: TasksOption = None,
    overwrite: Annotated[bool, typer.Option(help="lay out even if the directory is not empty")] = False,
    language: LanguageOption = LanguageChoice.cuda,
    json: JsonOption = False,
) -> None:
    """Create a workspace for a task: model.py, model_new.py skeleton, kernels/, harness files, and a
    SKILL.md for its kernel language that ends with this task's rules."""
    catalog = guarded(_catalog, tasks, as_json=json)
    doing = (
        f"inspecting {task} (its entry points run on meta in a child process), then laying out {directory}"
    )
    with step(doing, quiet=json):
        info = _run(
            lambda: new_workspace(catalog, task, directory, overwrite=overwrite, language=language.value),
            as_json=json,
        )
    _emit_json(info) if json else out.print(render.workspace_created(info))


@app.command("compile", short_help="Build the workspace's kernels (incremental).")
def compile_command(
    directory: Annotated[Path, typer.Argument(help="workspace directory")] = Path("."),
    arch: Annotated[
        str | None, typer.Option(help="GPU target, e.g. sm_90a (default: this GPU's, else sm_90a)")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Build the workspace's kernels into cuda_extension.so (incremental). Exit 1 when the build fails."""
    want_service_started()  # the build warms a judge for the next command (on a GPU machine)
    if arch is not None:
        guarded(check_arch, arch, "--arch", as_json=json)
    request = CompileRequest(arch=arch)

    async def work() -> BuildResult:
        session = Session.open(directory)
        if json:
            return await compile_kernels(session, request)
        if not err.is_interactive:  # a log or an assistant's pipe: a line per stage, once it is slow
            with step("planning the build") as shown:
                return await compile_kernels(session, request, progress=_compile_lines(shown))
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}", table_column=Column(overflow="fold")),
            BarColumn(bar_width=20), MofNCompleteColumn(), TimeElapsedColumn(),
            console=err, transient=True,
        ) as bar:  # fmt: skip
            job = bar.add_task("planning", total=None)
            return await compile_kernels(session, request, progress=_compile_progress(bar, job))

    result = _run(work, as_json=json)
    _emit_json(result) if json else render.build_report(result, out)
    if not result.ok:
        raise typer.Exit(1)


def _compile_progress(bar: Progress, job: TaskID) -> Callable[[BuildProgress], None]:
    """Name every file still compiling: the harness's binding.cpp takes 20-30 s the first time, and a
    bar that names only the last file done looks like a hang."""
    running: list[str] = []

    def on_progress(event: BuildProgress) -> None:
        description = event.message
        if event.stage == "compile" and event.file is not None:
            # Each unit has two compile events: its start, then its end.
            running.remove(event.file) if event.file in running else running.append(event.file)
            if running:
                names = [HARNESS_BINDING if f == "binding.cpp" else f for f in running]
                description = "compiling " + ", ".join(names)
        bar.update(job, description=escape(description), completed=event.done, total=event.total or None)

    return on_progress


def _compile_lines(shown: Step) -> Callable[[BuildProgress], None]:
    """The same stages as the bar, as lines: the plan, each file as it starts, the link."""

    def on_progress(event: BuildProgress) -> None:
        if event.stage == "compile" and event.file is not None and event.message.startswith("compiling"):
            shown.update("compiling " + (HARNESS_BINDING if event.file == "binding.cpp" else event.file))
        elif event.stage in ("plan", "link"):
            shown.update(event.message)

    return on_progress


def _evaluation_lines(kind: str, shown: Step) -> Callable[[BuildProgress], None]:
    """An evaluation's steps on the step's line: the build's files, the queue for a GPU, the judge."""
    return lambda event: shown.update(f"{kind}: {event.message}")


HARNESS_BINDING = "binding.cpp (the harness's, once per toolchain: 20-30 s)"


DirectoryArgument = Annotated[Path, typer.Argument(help="workspace directory")]


@app.command("verify", short_help="Check ModelNew against Model (GPU, or --device cpu).")
def verify_command(
    directory: DirectoryArgument = Path("."),
    trials: TrialsOption = 5,
    strict: StrictOption = False,
    device: DeviceOption = "cuda",
    audit: AuditOption = True,
    torch_glue: TorchGlueOption = False,
    precision_check: PrecisionCheckOption = None,
    call_timeout: CallTimeoutOption = 30.0,
    json: JsonOption = False,
) -> None:
    """Build, then check ModelNew against Model in a separate worker process. Exit 1 unless it passes."""
    want_service_started()
    request = guarded(
        VerifyRequest,
        trials=trials,
        strict=strict,
        device=device,
        audit=audit,
        torch_glue=torch_glue,
        precision_check=precision_check,
        call_timeout_s=call_timeout,
        as_json=json,
    )
    with step("verify: building", quiet=json) as shown:
        session = _cpu_checked(directory, device, as_json=json)
        result = _run(
            lambda: verify_kernels(session, request, progress=_evaluation_lines("verify", shown)),
            as_json=json,
        )
    _finish("verify", result, render.verify_lines(result), as_json=json)


@app.command("profile", short_help="Time ModelNew, PyTorch eager and torch.compile (GPU, or --device cpu).")
def profile_command(
    directory: DirectoryArgument = Path("."),
    baselines: BaselinesOption = "cached",
    budget: BudgetOption = 2.0,
    device: DeviceOption = "cuda",
    audit: AuditOption = True,
    torch_glue: TorchGlueOption = False,
    precision_check: PrecisionCheckOption = None,
    call_timeout: CallTimeoutOption = 30.0,
    json: JsonOption = False,
) -> None:
    """Build, then time ModelNew, PyTorch eager and torch.compile. Exit 1 unless timing succeeded."""
    want_service_started()
    request = guarded(
        ProfileRequest,
        baselines=baselines,
        budget_s=budget,
        device=device,
        audit=audit,
        torch_glue=torch_glue,
        precision_check=precision_check,
        call_timeout_s=call_timeout,
        as_json=json,
    )
    with step("profile: building", quiet=json) as shown:
        session = _cpu_checked(directory, device, as_json=json)
        result = _run(
            lambda: profile_kernels(session, request, progress=_evaluation_lines("profile", shown)),
            as_json=json,
        )
    _finish("profile", result, render.profile_lines(result), as_json=json)


@app.command("eval", short_help="verify + profile + reward (GPU, or --device cpu).")
def eval_command(
    directory: DirectoryArgument = Path("."),
    trials: TrialsOption = 5,
    strict: StrictOption = False,
    baselines: BaselinesOption = "cached",
    budget: BudgetOption = 2.0,
    device: DeviceOption = "cuda",
    audit: AuditOption = True,
    torch_glue: TorchGlueOption = False,
    precision_check: PrecisionCheckOption = None,
    call_timeout: CallTimeoutOption = 30.0,
    json: JsonOption = False,
) -> None:
    """verify + profile + reward (the paper's milestones: -1, 1, 2, 3)."""
    want_service_started()
    request = guarded(
        # The options' strings: the models validate them, and guarded() makes a refusal a usage error.
        lambda: EvaluateRequest(
            verify=VerifyRequest.model_validate(
                {
                    "trials": trials,
                    "strict": strict,
                    "device": device,
                    "audit": audit,
                    "torch_glue": torch_glue,
                    "precision_check": precision_check,
                    "call_timeout_s": call_timeout,
                    "sanitize": "auto",
                }
            ),
            profile=ProfileRequest.model_validate(
                {
                    "baselines": baselines,
                    "budget_s": budget,
                    "device": device,
                    "precision_check": precision_check,
                    "call_timeout_s": call_timeout,
                }
            ),
        ),
        as_json=json,
    )
    with step("eval: building", quiet=json) as shown:
        session = _cpu_checked(directory, device, as_json=json)
        result = _run(
            lambda: evaluate_kernels(session, request, progress=_evaluation_lines("eval", shown)),
            as_json=json,
        )
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


def _cpu_checked(directory: Path, device: str, *, as_json: bool) -> Session:
    """The workspace's session, after refusing (one line, exit 2) a CPU run of a candidate that needs a
    GPU: its kernels would be built, then fail on the first CPU tensor (tools/cpu_path.py)."""
    session = guarded(Session.open, directory, as_json=as_json)
    guarded(check_cpu_candidate, session.workspace, device, as_json=as_json)
    return session


@app.command("serve", short_help="Run the MCP server (stdio, or --http with bearer tokens).")
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
    session_idle_timeout: Annotated[
        float, typer.Option(min=0.0, help="seconds without a call after which a session ends (0: never)")
    ] = 3600.0,
    archive_sessions: Annotated[
        Path | None, typer.Option(help="move the workspaces of ended sessions here instead of deleting them")
    ] = None,
    keep_workspaces: Annotated[
        bool,
        typer.Option(
            "--keep-workspaces", help="leave the sessions' workspaces on disk when the server exits"
        ),
    ] = False,
    allow_reduced_isolation: Annotated[
        bool,
        typer.Option(
            "--allow-reduced-isolation",
            help=f"single-user local use: where no sandbox view can be built, run agent commands and builds "
            f"with what the machine allows (also ${REDUCED_ISOLATION_ENV}=1); results say so",
        ),
    ] = False,
    authorization_server: Annotated[
        str | None,
        typer.Option(
            help="the OAuth authorization server that issues this server's tokens (served as RFC 9728 metadata)"
        ),
    ] = None,
    max_failed_auth: Annotated[
        int,
        typer.Option(
            min=1,
            help="refused authentications per minute from one address before its requests without a "
            "valid token get HTTP 429 (a valid token is never refused)",
        ),
    ] = 10,
) -> None:
    """Run the MCP server (stdio by default): every tool, for IDE assistants and remote agents."""
    try:
        from cuda_agent_mcp.server.app import build_server
        from cuda_agent_mcp.server.auth import StaticTokens
        from cuda_agent_mcp.server.http_guard import run_http
        from cuda_agent_mcp.server.jobs import JobBoard
        from cuda_agent_mcp.server.sessions import SessionRegistry
        from cuda_agent_mcp.server.stdio import serve_stdio
    except ImportError as exc:
        fail(
            f"the MCP server needs the mcp extra: pip install 'cuda-agent-mcp[mcp]' ({exc})",
            kind="infrastructure",
            type_name="ImportError",
        )
    if allow_reduced_isolation:
        os.environ[REDUCED_ISOLATION_ENV] = "1"  # children (builds, the build's confinement) see it too
    if not _say_isolation():
        raise typer.Exit(3)
    registry = SessionRegistry(
        root or default_cache_dir() / "sessions",
        _catalog(tasks),
        scheduler=visible_gpu_scheduler(),
        idle_timeout_s=session_idle_timeout or None,
        archive_dir=archive_sessions,
    )
    jobs = JobBoard(budget_s=tool_budget)
    try:
        if http is None:
            serve_stdio(build_server(registry, jobs=jobs))  # stdout is the protocol from here on
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
        server = build_server(
            registry,
            tokens=tokens,
            authorization_server=authorization_server,
            url=f"http://{host}:{port}",
            jobs=jobs,
        )
        app = server.streamable_http_app(host=host)
        run_http(app, host, int(port), tokens=tokens, max_failed_auth=max_failed_auth)
    finally:
        registry.close(keep_workspaces=keep_workspaces)


def _say_isolation() -> bool:
    """One line on stderr saying what confines agent commands here; False (after the refusal's one line)
    when nothing can and reduced isolation was not asked for."""
    from cuda_agent_mcp.executors import isolation_report, reduced_isolation_allowed
    from cuda_agent_mcp.executors.sandboxed import refusal, view_backend

    if view_backend() is None and not reduced_isolation_allowed():
        err.print(f"[red]error:[/] {escape(str(refusal()))}", highlight=False, soft_wrap=True)
        return False
    layers = ", ".join(isolation_report())
    if "reduced-isolation" in layers:
        err.print(
            f"[yellow]warning:[/] REDUCED ISOLATION (opted in): agent commands run with only {layers}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        err.print(
            f"cuda-agent serve: agent commands and builds run isolated: {layers}",
            highlight=False,
            soft_wrap=True,
        )
    return True


@app.command("journal", short_help="Your recent evaluation results, newest first.")
def journal_command(
    limit: Annotated[int, typer.Option(help="show at most this many, newest first")] = 20,
    current_rules: Annotated[
        bool,
        typer.Option(
            "--current-rules",
            help=f"only records judged under this version's verdict rules ({VERDICT_RULES_VERSION})",
        ),
    ] = False,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="also show, after yours, an older journal in the build cache (kept there before each "
            "user had their own; it may hold other users' runs)",
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """Your recent evaluations from your own journal (in your state directory, private to you): every
    verify, profile and eval result, kept across restarts (interrupted ones included), each with the
    verdict rules it ran under."""
    rules = VERDICT_RULES_VERSION if current_rules else None
    own = guarded(
        lambda: open_journal(default_journal_path()).listing(limit=limit, rules_version=rules), as_json=json
    )
    legacy = legacy_journal_path(default_cache_dir())
    listing = own
    if legacy.is_file() and shared:
        try:
            older = open_journal(legacy).listing(limit=limit, rules_version=rules)
        except (OSError, sqlite3.Error) as exc:
            fail(
                f"the shared journal {legacy} cannot be read ({exc}): it may be another user's", as_json=json
            )
        listing = own.model_copy(update={"shared_path": str(legacy), "shared_records": older.records})
    elif legacy.is_file() and not json:
        err.print(
            f"note: an older journal at {escape(str(legacy))} (perhaps shared) is not shown; --shared shows it after yours",
            highlight=False,
            soft_wrap=True,
        )
    if json:
        _emit_json(listing)
        return
    render.journal_table(listing, out)
    if listing.shared_path is not None:
        render.journal_table(JournalListing(path=listing.shared_path, records=listing.shared_records), out)


def _finish(title: str, result: VerifyResult | ProfileResult, lines: list[str], *, as_json: bool) -> None:
    """Print a verify or profile result; exit 1 unless its verdict passed."""
    _emit_json(result) if as_json else render.verdict_report(title, result.verdict, out, extra=lines)
    if result.verdict.status != "passed":
        raise typer.Exit(1)


def main() -> None:
    """The console script: the commands' own error contract, and a last net for everything else
    (click's usage errors, bugs), so that no traceback and no empty --json output ever reaches a user."""
    try:
        code = app(standalone_mode=False)
    except ClickException as exc:  # a bad option or argument, found by click before any command ran
        if wants_json():
            details = ErrorDetails(kind="usage", type=type(exc).__name__, message=exc.format_message())
            sys.stdout.write(ErrorOutput(error=details).model_dump_json() + "\n")
        _show_click_error(exc)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        try:
            internal_error(exc)
        except typer.Exit as done:
            sys.exit(done.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


# Typer 0.2x vendors click (typer._click); earlier versions use click itself. Either way this is the class
# (the checker reads it from the installed typer).
if TYPE_CHECKING:
    from typer._click.exceptions import ClickException
else:
    ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _show_click_error(exc: ClickException) -> None:
    if help_markup() is None:
        exc.show()
        return
    from typer import rich_utils

    rich_utils.rich_format_error(exc)


if __name__ == "__main__":
    main()
