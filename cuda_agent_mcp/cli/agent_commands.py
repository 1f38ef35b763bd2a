"""`cuda-agent optimize` (the agent loop) and `cuda-agent policy list|show|serve`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import BaseModel
from rich.markup import escape

from cuda_agent_mcp.cli.common import emit_json, emit_json_data, err, fail, guarded, help_markup, out, run
from cuda_agent_mcp.cli.options import LanguageChoice
from cuda_agent_mcp.cli.tables import Column, print_table
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.gpu import require_gpu

if TYPE_CHECKING:  # the agent package itself is imported when a command needs it (its extra)
    from cuda_agent_mcp.agent import EpisodeEvent, EpisodeResult

policy_app = typer.Typer(
    help="Bundled agent policies: list, show, serve with vLLM.",
    no_args_is_help=True,
    rich_markup_mode=help_markup(),
)
trajectories_app = typer.Typer(
    help="Agent-loop trajectories: rejection fine-tuning data.",
    no_args_is_help=True,
    rich_markup_mode=help_markup(),
)
RUNS_DIR = Path("cuda-agent-runs")


class OptimizeReport(BaseModel):
    """What `optimize --json` prints: the winning trajectory (if any) and every sample."""

    task_id: str
    policy: str
    workspace: str
    best: dict[str, object] | None
    samples: list[dict[str, object]]


def _agent() -> ModuleType:
    """The agent package, or a readable exit when its extra is missing."""
    try:
        import cuda_agent_mcp.agent as agent
    except ImportError as exc:
        fail(
            f"the agent loop needs: pip install 'cuda-agent-mcp[agent]' ({exc})",
            kind="infrastructure",
            type_name="ImportError",
        )
    return agent


def _session(
    task: str,
    workspace: Path | None,
    tasks: list[Path] | None,
    stamp: str,
    runs_dir: Path | None,
    language: KernelLanguage | None = None,
) -> tuple[Session, Path]:
    """A session on an existing workspace directory, or a new workspace for a task id or .py file (its
    kernels in `language`, default cuda); and the run's directory (trajectories, and the new workspace
    unless --workspace says where). An existing workspace keeps the language it was laid out in."""
    as_path = Path(task)
    if as_path.is_dir() and (as_path / "model.py").is_file():
        session = Session.open(as_path)
        if language is not None and language != session.workspace.language:
            raise UsageError(
                f"--language {language}: {as_path} is a workspace for {session.workspace.language} "
                f"kernels, and a workspace keeps its language; give a task id or .py file to lay out a "
                f"new workspace in {language}"
            )
        return session, (runs_dir or as_path.parent / RUNS_DIR) / stamp
    catalog = TaskCatalog.from_environment(tasks or [])
    chosen = catalog.get(task)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", chosen.id).strip("-")
    run_dir = (runs_dir or RUNS_DIR) / f"{slug}-{stamp}"
    return Session.create(chosen, workspace or run_dir / "workspace", language=language or "cuda"), run_dir


def optimize_command(
    task: Annotated[
        str, typer.Argument(help="task id, a KernelBench-format .py file, or a workspace directory")
    ],
    policy: Annotated[str, typer.Option(help="bundled preset name or a preset directory")] = "cuda-agent",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    ] = None,
    model: Annotated[str | None, typer.Option(help="model name to request (overrides the preset's)")] = None,
    samples: Annotated[
        int, typer.Option(min=1, max=64, help="independent trajectories; the best is kept")
    ] = 1,
    max_turns: Annotated[int | None, typer.Option(min=1, help="override the preset's turn budget")] = None,
    seed: Annotated[int, typer.Option(help="seed of the first sample (sample i uses seed + i)")] = 0,
    temperature: Annotated[float | None, typer.Option(min=0.0, max=2.0)] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="where to lay out the workspace (default: in the run's directory)")
    ] = None,
    runs_dir: Annotated[
        Path | None,
        typer.Option(
            help="where each run gets its directory (trajectories, the new workspace); default: "
            "./cuda-agent-runs, or beside a workspace directory given as the task"
        ),
    ] = None,
    trajectory_dir: Annotated[
        Path | None, typer.Option(help="where trajectories go (default: the run's directory)")
    ] = None,
    resume: Annotated[
        Path | None, typer.Option(help="continue a trajectory (its file edits are replayed)")
    ] = None,
    device: Annotated[
        str, typer.Option(help="cuda (needs a GPU), or cpu for machines without one (PyTorch candidates)")
    ] = "cuda",
    baselines: Annotated[
        str, typer.Option(help="eager/torch.compile timings: cached (measured once per task), measure, skip")
    ] = "cached",
    no_audit: Annotated[
        bool, typer.Option("--no-audit", help="accept PyTorch compute in ModelNew (testing only)")
    ] = False,
    tasks: Annotated[list[Path] | None, typer.Option("--tasks", "-t", help="extra task source")] = None,
    language: Annotated[
        LanguageChoice | None,
        typer.Option(
            help="kernel language of the new workspace: cuda (nvcc builds a torch extension, the default), "
            "cupy (NVRTC compiles kernels/*.cu, launched through CuPy) or triton (@triton.jit kernels in "
            "model_new.py); a workspace directory keeps its own"
        ),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Run the agent loop on a task with a policy served over the OpenAI wire format; the workspace ends
    with the best verified kernel and every run leaves a JSONL trajectory, in a directory of its own
    under --runs-dir (default ./cuda-agent-runs)."""
    agent = _agent()
    if device not in ("cuda", "cpu"):
        fail(f"--device {device!r}: use cuda or cpu", as_json=json)
    if baselines not in ("cached", "measure", "skip"):
        fail(f"--baselines {baselines!r}: use cached, measure or skip", as_json=json)
    if resume is not None and not resume.is_file():
        fail(f"--resume {resume}: no such trajectory file (runs leave trajectory.jsonl files)", as_json=json)
    guarded(require_gpu, device, as_json=json)  # before a workspace, a run directory or a policy call
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    preset = guarded(agent.load_policy, policy, as_json=json)
    if model:
        preset = preset.model_copy(update={"model": model, "served_model_name": None, "lora_adapter": None})
    budgets = preset.budgets.model_copy(update={"max_turns": max_turns}) if max_turns else preset.budgets
    settings = agent.EnvironmentSettings(device=device, audit=not no_audit, baselines=baselines)
    prior = guarded(agent.load_trajectory, resume, as_json=json) if resume else None
    client = guarded(agent.PolicyClient, preset, base_url, as_json=json)
    chosen_language = language.value if language is not None else None
    session, run_dir = guarded(
        _session, task, workspace, tasks, stamp, runs_dir, chosen_language, as_json=json
    )
    settings = settings.model_copy(update={"language": session.workspace.language})
    session.scheduler = agent.gpu_scheduler(settings)  # queue state for the live view; shared by --samples
    trajectories = trajectory_dir or run_dir
    view = None if json else _LiveLines()

    async def work() -> tuple[EpisodeResult | None, list[EpisodeResult]]:
        try:
            if samples == 1:
                result = await agent.run_episode(
                    session,
                    preset,
                    client,
                    trajectories / "trajectory.jsonl",
                    settings=settings,
                    budgets=budgets,
                    seed=seed,
                    temperature=temperature,
                    on_event=view,
                    resume=prior,
                )
                return (result if result.best else None), [result]
            return await agent.best_of(
                session,
                preset,
                client,
                samples,
                trajectories,
                settings=settings,
                budgets=budgets,
                seed=seed,
                on_event=view,
            )
        finally:
            await client.close()

    winner, results = run(work, as_json=json)
    report = OptimizeReport(
        task_id=session.task.id,
        policy=preset.name,
        workspace=str(session.workspace.root),
        best=winner.model_dump(mode="json", exclude={"best": {"files"}}) if winner else None,
        samples=[r.model_dump(mode="json", exclude={"best": {"files"}}) for r in results],
    )
    if json:
        emit_json(report)
    else:
        _summary(report)
    failures = [r.error for r in results if r.error]
    if winner is None and failures:
        # The report is already out (as JSON under --json): the error is one more line on stderr.
        fail(failures[0], kind="infrastructure", type_name="EndpointError", as_json=False)
    if winner is None:
        raise typer.Exit(1)


class _LiveLines:
    """The live view: one line per turn and per tool call, on stderr (stdout stays for results)."""

    def __call__(self, event: EpisodeEvent) -> None:
        best = "no verified kernel yet"
        if event.best_verified:
            best = f"best: verified, reward {event.best_reward}"
            if event.best_speedup_vs_eager is not None:
                best += f" ({event.best_speedup_vs_eager:.2f}x eager, {event.best_speedup_vs_compile or 0:.2f}x compile)"
        compiled = {None: "-", True: "ok", False: "failed"}[event.compile_ok]
        what = event.tool or event.kind
        if event.gpu_queue:
            best += f" · {event.gpu_queue}"
        err.print(
            f"turn {event.turn:>3} · {what:<10} · {event.detail[:70]!s:<70} · compile {compiled} · {best}",
            highlight=False,
            markup=False,
        )


def _figure(best: dict[str, object], key: str) -> str:
    value = best.get(key)
    return f"{value:.3f}" if isinstance(value, float) else "-"


def _summary(report: OptimizeReport) -> None:
    """The samples as a table; the paths (long, never cut) as lines of their own below it."""
    headers = ["seed", "temp", "stop", "turns", "tokens", "gpu s", "best reward", "vs eager", "vs compile"]
    rows = []
    for sample in report.samples:
        best = sample.get("best")
        best = best if isinstance(best, dict) else {}
        rows.append(
            [
                *(
                    escape(str(sample[key]))
                    for key in ("seed", "temperature", "stop_reason", "turns", "tokens", "gpu_s")
                ),
                _figure(best, "reward") if best else "not verified",
                _figure(best, "speedup_vs_eager"),
                _figure(best, "speedup_vs_compile"),
            ]
        )
    columns = [Column(h, keep=h == "stop") for h in headers]
    print_table(out, columns, rows, title=f"{escape(report.task_id)} with {escape(report.policy)}")
    out.print(f"workspace: {escape(report.workspace)}", highlight=False, soft_wrap=True)
    for sample in report.samples:
        out.print(
            f"trajectory (seed {sample['seed']}): {escape(str(sample['trajectory']))}",
            highlight=False,
            soft_wrap=True,
        )


@policy_app.command("list")
def policy_list(json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The bundled presets."""
    agent = _agent()
    presets = guarded(agent.list_policies, as_json=json)
    if json:
        emit_json_data([p.model_dump(mode="json") for p in presets])
        return
    columns = [Column("name", keep=True), Column("model", keep=True), Column("format"), Column("description")]
    rows = [[escape(p.name), escape(p.model), p.action_format, escape(p.description)] for p in presets]
    print_table(out, columns, rows, title="policies")


@policy_app.command("show")
def policy_show(name: Annotated[str, typer.Argument(help="preset name or directory")]) -> None:
    """A preset in full, with its system prompt."""
    agent = _agent()
    preset = guarded(agent.load_policy, name)
    out.print_json(data=preset.model_dump(mode="json"))
    out.print(preset.system_prompt(), markup=False, highlight=False)


@policy_app.command("serve", short_help="The exact `vllm serve` command for a preset (--run starts it).")
def policy_serve(
    name: Annotated[str, typer.Argument(help="preset name or directory")],
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    host: str = "127.0.0.1",
    run_it: Annotated[bool, typer.Option("--run", help="start vLLM instead of printing the command")] = False,
) -> None:
    """Print (or with --run, start) the exact `vllm serve` command for a preset."""
    agent = _agent()
    preset = guarded(agent.load_policy, name)
    command = guarded(agent.vllm_command, preset, host=host, port=port)
    from cuda_agent_mcp.agent.policy import shell_line

    if not run_it:
        sys.stdout.write(shell_line(command) + "\n")  # one line, never wrapped: it is meant to be pasted
        return
    try:
        raise typer.Exit(subprocess.call(command, env=os.environ.copy()))
    except FileNotFoundError:
        fail(
            "vllm is not installed here: pip install vllm",
            kind="infrastructure",
            type_name="FileNotFoundError",
        )


@trajectories_app.command("export", short_help="Rejection fine-tuning rows from trajectories (chat JSONL).")
def trajectories_export(
    paths: Annotated[list[Path], typer.Argument(help="trajectory .jsonl files, or directories holding them")],
    output: Annotated[Path, typer.Option("--out", "-o", help="the chat-format JSONL to write")],
    min_reward: Annotated[
        float, typer.Option(help="keep trajectories whose best reward is above this")
    ] = 0.0,
    allow_invalid_calls: Annotated[
        bool, typer.Option("--allow-invalid-calls", help="keep trajectories with invalid tool calls")
    ] = False,
    json: Annotated[bool, typer.Option("--json", help="print each input's verdict as JSON")] = False,
) -> None:
    """Keep positive-reward trajectories without invalid calls, loops or infrastructure errors (the
    paper's rejection fine-tuning filter) and write them as chat rows (messages, tools, metadata)."""
    from cuda_agent_mcp.env.sft import FilterPolicy, export_sft

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"no such file or directory: {', '.join(missing)}", as_json=json)
    files = sorted({f for p in paths for f in (p.rglob("*.jsonl") if p.is_dir() else [p])})
    if not files:
        fail("no trajectory files found (a run leaves trajectory.jsonl in its directory)", as_json=json)
    policy = FilterPolicy(min_reward=min_reward, allow_invalid_calls=allow_invalid_calls)
    verdicts = guarded(export_sft, files, output, policy, as_json=json)
    if json:
        emit_json_data([v.model_dump() for v in verdicts])
        return
    kept = sum(v.kept for v in verdicts)
    rows = [[escape(v.path), escape(v.reason)] for v in verdicts]
    title = f"{kept} of {len(verdicts)} kept, written to {escape(str(output))}"
    print_table(out, [Column("trajectory", keep=True), Column("verdict")], rows, title=title)
