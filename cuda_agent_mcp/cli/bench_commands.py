"""`cuda-agent bench`: score a task set's solutions (run), read a run back (show, report), and measure the
committed baseline table (baselines). Exit codes: 0 the run is complete; 1 it is not (interrupted, or
tasks left with infrastructure errors: run the same command again), or no selected task's solution could be
judged (missing, not imported or not built); 2 usage; 3 infrastructure."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ValidationError
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from cuda_agent_mcp.bench import (
    SolutionSpec,
    SuiteProgress,
    SuiteRequest,
    SuiteSummary,
    run_suite,
    summary_of,
)
from cuda_agent_mcp.bench.baseline_run import BaselineRun, BaselineRunProgress, measure_table
from cuda_agent_mcp.bench.baselines import load_table
from cuda_agent_mcp.bench.browser import open_page
from cuda_agent_mcp.bench.published import RatioSummary, compare_with_published
from cuda_agent_mcp.bench.report import write_report
from cuda_agent_mcp.bench.rundir import read_run
from cuda_agent_mcp.bench.selection import select_tasks
from cuda_agent_mcp.bench.solutions import SINGLE_FILE_LANGUAGES
from cuda_agent_mcp.bench.summary import run_directory
from cuda_agent_mcp.build import default_cache_dir
from cuda_agent_mcp.cli.common import describe_validation, emit_json, err, guarded, out, run
from cuda_agent_mcp.cli.options import AuditOption, BudgetOption, DeviceOption, LanguageChoice, TrialsOption

bench_app = typer.Typer(
    help="Score a task set's solutions: pass rate, fast_p, geomean speedups, SOL, and an HTML report.",
    short_help="Score a task set's solutions and report them.",
    no_args_is_help=True,
)

TasksOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--tasks", "-t", help="task source: a KernelBench tree, a dataset, .py files (default: the catalog)"
    ),
]
LevelOption = Annotated[list[int] | None, typer.Option("--level", help="only this level (repeatable)")]
IdOption = Annotated[list[str] | None, typer.Option("--id", help="only this task id (repeatable)")]
IdsFileOption = Annotated[Path | None, typer.Option(help="only the task ids in this file, one per line")]
LimitOption = Annotated[int | None, typer.Option(min=1, help="only the first N selected tasks")]
ContainsOption = Annotated[str | None, typer.Option(help="only ids or names containing this")]
BaselinesDeviceOption = Annotated[
    str, typer.Option(help="cuda, or cpu (pure-PyTorch or tiny tasks, e.g. in CI)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")]


class _BaselinesOutput(BaseModel):
    """What `bench baselines --json` prints."""

    run: BaselineRun
    comparison: RatioSummary | None


def _ids(ids: list[str] | None, ids_file: Path | None) -> list[str]:
    found = list(ids or [])
    if ids_file is not None:
        try:
            found += [line.strip() for line in ids_file.read_text().splitlines() if line.strip()]
        except OSError as exc:
            _usage(f"cannot read --ids-file: {exc}")
    return found


def _usage(message: str) -> None:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(2)


@bench_app.command("run")
def bench_run(
    solutions: Annotated[
        Path | None,
        typer.Option(help="directory of solutions: workspaces by task id, or KernelBench .py files"),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            help="workspaces, kernelbench (single-file ModelNew + load_inline, or + @triton.jit kernels), or auto"
        ),
    ] = "auto",
    policy: Annotated[
        str | None, typer.Option(help="instead of solutions: run this agent policy per task")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="the policy's OpenAI-compatible endpoint")] = None,
    model: Annotated[
        str | None, typer.Option(help="the model name to request from the policy endpoint")
    ] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, help="the policy's turn budget per task")] = None,
    language: Annotated[
        LanguageChoice,
        typer.Option(
            help="kernel language of the solutions: cuda (nvcc, a torch extension), cupy (NVRTC, launched "
            "through CuPy) or triton (@triton.jit kernels in model_new.py); a workspace whose "
            ".cuda-agent/workspace.json records a language is built in that one; a policy writes in this "
            "language; a KernelBench single file is triton where it imports triton, else cuda (cupy is "
            "for workspaces)"
        ),
    ] = LanguageChoice.cuda,
    tasks: TasksOption = None,
    level: LevelOption = None,
    id: IdOption = None,
    ids_file: IdsFileOption = None,
    contains: ContainsOption = None,
    limit: LimitOption = None,
    only_with_solutions: Annotated[
        bool,
        typer.Option(help="leave out selected tasks without a solution instead of counting them as failed"),
    ] = False,
    rules: Annotated[
        str,
        typer.Option(
            help="cuda-agent (the paper's rules) or kernelbench (verify's --torch-glue, 1e-2, no precision check)"
        ),
    ] = "cuda-agent",
    device: DeviceOption = "cuda",
    audit: AuditOption = True,
    out_dir: Annotated[
        Path, typer.Option("--out", help="the report directory (the same again resumes)")
    ] = Path("bench-report"),
    overwrite: Annotated[
        bool,
        typer.Option(help="start a new run in --out even if it holds another (its files are moved aside)"),
    ] = False,
    trials: TrialsOption = 5,
    budget: BudgetOption = 2.0,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="tasks on the GPUs at once (default 2 per GPU)")
    ] = None,
    baselines: Annotated[
        list[Path] | None,
        typer.Option(help="baseline tables (files or directories) to load (default benchmarks/baselines)"),
    ] = None,
    record_baselines: Annotated[
        Path | None, typer.Option(help="add every baseline this run measures to this machine's table in DIR")
    ] = None,
    json: JsonOption = False,
) -> None:
    """Score every selected task's solution under a rule set and write report.html, summary.json and rows.csv."""
    spec = _solution_spec(solutions, format, policy, base_url, model, max_turns, language.value)
    tables = baselines if baselines is not None else [p for p in [Path("benchmarks/baselines")] if p.is_dir()]
    try:
        request = SuiteRequest(
            sources=[str(t) for t in tasks or []],
            levels=level or [],
            ids=_ids(id, ids_file),
            contains=contains,
            limit=limit,
            only_with_solutions=only_with_solutions,
            solutions=spec,
            # The options' strings: the model validates them (a usage error below when it refuses).
            rules=rules,  # type: ignore[arg-type]
            device=device,  # type: ignore[arg-type]
            audit=audit,
            out_dir=str(out_dir),
            trials=trials,
            budget_s=budget,
            concurrency=concurrency,
            baseline_tables=[str(p) for p in tables],
            record_baselines=str(record_baselines) if record_baselines else None,
            overwrite=overwrite,
        )
    except ValueError as exc:
        _usage(describe_validation(exc) if isinstance(exc, ValidationError) else str(exc).splitlines()[0])
    view = None if json else _SuiteBar()
    try:
        with view or _nothing():
            result = run(lambda: run_suite(request, progress=view))
    except KeyboardInterrupt:
        summary = summary_of(out_dir) if (out_dir / "run.json").is_file() else None
        if json and summary is not None:
            emit_json(summary)
        err.print(
            f"interrupted: {summary.measured if summary else 0} tasks have rows in {out_dir}; run the same "
            "command again to continue (nothing measured is lost)"
        )
        raise typer.Exit(1) from None
    if json:
        emit_json(result)
    else:
        out.print(summary_table(result.summary))
        for note in result.summary.notes:
            out.print(f"note: {escape(note)}", highlight=False)
        if result.ignored_solutions:
            out.print(f"note: {len(result.ignored_solutions)} solutions match no selected task: "
                      + escape(", ".join(result.ignored_solutions[:8])), highlight=False)  # fmt: skip
        out.print(f"report: {result.report_html}")
    if not result.summary.complete:
        raise typer.Exit(1)
    if result.rows and not any(row.failure not in UNJUDGED for row in result.rows):
        first = result.rows[0]
        err.print(
            f"[red]error:[/] no selected task's solution could be judged ({len(result.rows)} tasks; "
            f"{escape(first.task_id)}: {first.failure}: {escape(first.message)})",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


# Rows with no verdict behind them: a run made only of these scored nothing.
UNJUDGED = frozenset({"missing_solution", "import_failed", "compile_failed"})


def _solution_spec(
    solutions: Path | None,
    format: str,
    policy: str | None,
    base_url: str | None,
    model: str | None,
    max_turns: int | None,
    language: str,
) -> SolutionSpec:
    if policy is not None:
        if solutions is not None:
            _usage("give --solutions or --policy, not both")
        return SolutionSpec(
            kind="policy",
            policy=policy,
            base_url=base_url,
            model=model,
            max_turns=max_turns,
            language=language,  # type: ignore[arg-type]  # a LanguageChoice value
        )
    if solutions is None:
        _usage("give --solutions DIR (workspaces or KernelBench files) or --policy NAME")
    assert solutions is not None
    if format not in ("auto", "workspaces", "kernelbench"):
        _usage("--format is workspaces, kernelbench or auto")
    if format == "auto":
        if not solutions.is_dir():
            _usage(f"{solutions}: no such solutions directory")
        format = "workspaces" if any(solutions.glob("**/model_new.py")) else "kernelbench"
    if format == "kernelbench" and language not in SINGLE_FILE_LANGUAGES:
        _usage(
            f"KernelBench single-file solutions are CUDA (load_inline) or Triton: --language {language} is "
            "for workspaces"
        )
    # kind checked just above; language a LanguageChoice value
    return SolutionSpec(kind=format, path=str(solutions), language=language)  # type: ignore[arg-type]


class _SuiteBar:
    """The live view on stderr: a bar with ETA and the running pass and fast counts."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), console=err, transient=False,
        )  # fmt: skip
        self.job = self.bar.add_task("starting", total=None)

    def __enter__(self) -> _SuiteBar:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def __call__(self, event: SuiteProgress) -> None:
        description = (
            f"correct {event.correct} · fast_1(compile) {event.fast_1_compile} · task errors {event.task_errors}"
            + (f" · running {len(event.running)}" if event.running else "")
        )
        self.bar.update(self.job, description=description, completed=event.done, total=event.total)
        if event.last:
            self.bar.console.print(escape(event.last), highlight=False)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def summary_table(summary: SuiteSummary) -> Table:
    state = "complete" if summary.complete else "partial"
    table = Table(
        title=f"run {summary.run_id} · {summary.rules} rules · {summary.measured}/{summary.selected} tasks · {state}",
        title_justify="left",
    )
    columns = ("group", "scored", "correct", "pass", "fast_1 eager", "fast_1 compile", "geomean eager",
               "geomean compile", "SOL frac", "task errors")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "group" else "right")

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    def x(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}x"

    for g in summary.table_groups():
        table.add_row(
            g.group, str(g.scored), str(g.correct), pct(g.pass_rate), pct(g.eager.fast_p[1].rate),
            pct(g.compile.fast_p[1].rate), x(g.eager.geomean_speedup), x(g.compile.geomean_speedup),
            "-" if g.sol_fraction_median is None else f"{g.sol_fraction_median:.2f}", str(len(g.task_errors)),
        )  # fmt: skip
    return table


@bench_app.command("show")
def bench_show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="a report directory or a run id")],
    json: JsonOption = False,
) -> None:
    """The summary of a run, finished or still going."""

    async def work() -> SuiteSummary:
        return summary_of(run_directory(default_cache_dir(), run_ref))

    summary = run(work)
    if json:
        emit_json(summary)
        return
    out.print(summary_table(summary))
    for note in summary.notes:
        out.print(f"note: {escape(note)}", highlight=False)


@bench_app.command("report")
def bench_report(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="a report directory or a run id")],
    screenshot: Annotated[
        Path | None, typer.Option(help="also open the page in headless chromium and save a screenshot here")
    ] = None,
) -> None:
    """Write a run's report.html, summary.json and rows.csv again from its rows (e.g. after installing the
    report extra); optionally check the page in chromium and keep a screenshot."""

    async def work() -> list[str]:
        directory = run_directory(default_cache_dir(), run_ref)
        summary = summary_of(directory)
        return write_report(directory, summary, read_run(directory)[1])

    paths = run(work)
    for path in paths:
        out.print(path)
    if screenshot is not None:
        page = next(Path(p) for p in paths if p.endswith("report.html"))
        opened = guarded(open_page, page, screenshot)
        if opened.console or opened.screenshot is None:
            err.print(
                f"[red]error:[/] the page did not load cleanly: {escape('; '.join(opened.console)[:500])}"
            )
            raise typer.Exit(1)
        out.print(f"screenshot: {opened.screenshot}")


@bench_app.command("baselines")
def bench_baselines(
    table_dir: Annotated[Path, typer.Option(help="where this machine's table is kept")] = Path(
        "benchmarks/baselines"
    ),
    tasks: TasksOption = None,
    level: LevelOption = None,
    id: IdOption = None,
    ids_file: IdsFileOption = None,
    limit: LimitOption = None,
    device: BaselinesDeviceOption = "cuda",
    budget: Annotated[float, typer.Option(min=0.1, help="timing budget per baseline, seconds")] = 2.0,
    compare: Annotated[
        Path | None,
        typer.Option(help="a KernelBench timing file (baseline_time_torch.json) to compare eager times with"),
    ] = None,
    json: JsonOption = False,
) -> None:
    """Measure eager and torch.compile times of every selected task not yet in this machine's table (written
    after each task: a cut run keeps what it measured), then compare with KernelBench's published times."""
    selection = SuiteRequest(
        sources=[str(t) for t in tasks or []],
        levels=level or [],
        ids=_ids(id, ids_file),
        limit=limit,
        solutions=SolutionSpec(kind="policy"),
        device=device,  # type: ignore[arg-type]  # the option's string: the model validates it
        out_dir=".",
        budget_s=budget,
    )
    bar = None if json else Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(), console=err)  # fmt: skip
    job = bar.add_task("baselines", total=None) if bar else None

    def on_progress(event: BaselineRunProgress) -> None:
        if bar is not None and job is not None:
            text = f"baselines ({event.skipped} already in the table, {event.failed} failed) · {event.last}"
            bar.update(job, description=escape(text), completed=event.done, total=event.total)

    try:
        with bar or _nothing():
            result = run(lambda: measure_table(selection, table_dir, progress=on_progress))
    except KeyboardInterrupt:
        err.print(
            f"interrupted: every baseline measured so far is in {table_dir}; run the same command to continue"
        )
        raise typer.Exit(1) from None
    comparison = None
    if compare is not None:
        catalog_tasks = select_tasks(selection.model_copy(update={"limit": None}))
        comparison = compare_with_published(load_table(Path(result.table)), catalog_tasks, compare)
    if json:
        emit_json(_BaselinesOutput(run=result, comparison=comparison))
        return
    out.print(
        f"{result.table}: {result.measured} measured, {result.cached} from this machine's cache, "
        f"{result.already_in_table} already in the table, {len(result.failed)} failed, "
        f"{len(result.infra_errors)} infrastructure errors ({result.wall_s:.0f} s)"
    )
    if comparison is not None and comparison.median is not None:
        out.print(
            f"ours / published ({escape(comparison.hardware)}) over {comparison.compared} tasks: median "
            f"{comparison.median:.2f}, p10 {comparison.p10:.2f}, p90 {comparison.p90:.2f}, "
            f"range {comparison.minimum:.2f}-{comparison.maximum:.2f}, {len(comparison.outliers)} outliers"
        )
    if result.infra_errors:
        raise typer.Exit(1)
