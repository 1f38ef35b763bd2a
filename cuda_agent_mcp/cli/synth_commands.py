"""`cuda-agent tasks synthesize`: make a dataset of tasks (docs/synthesis.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from cuda_agent_mcp.cli.common import emit_json, err, guarded, out
from cuda_agent_mcp.cli.common import run as run_async
from cuda_agent_mcp.errors import GpuUnavailable, UsageError
from cuda_agent_mcp.synth.pipeline import SynthesisProgress, SynthesisReport, synthesize
from cuda_agent_mcp.synth.settings import LlmComposerSettings, SynthesisSettings
from cuda_agent_mcp.tasks.fetch import fetched_tree
from cuda_agent_mcp.tools.gpu import gpu_absence, gpu_specs

_PLAIN_EVERY_S = 10.0


def synthesize_command(
    out_dir: Annotated[
        Path, typer.Argument(metavar="OUT", help="the run's directory (resumed if it holds one)")
    ],
    count: Annotated[int, typer.Option(help="candidates to compose")] = 100,
    seed: Annotated[int, typer.Option(help="the same seed composes the same candidates")] = 0,
    composer: Annotated[
        str, typer.Option(help="programmatic (seed operators chained by rules) or llm")
    ] = "programmatic",
    base_url: Annotated[
        str | None, typer.Option(help="llm: an OpenAI-compatible endpoint (vLLM, any API)")
    ] = None,
    model: Annotated[str | None, typer.Option(help="llm: the model to ask")] = None,
    api_key_env: Annotated[
        str, typer.Option(help="llm: the variable holding the API key")
    ] = "OPENAI_API_KEY",
    max_ops: Annotated[int, typer.Option(help="most operators in one program (1-5)")] = 5,
    dtype: Annotated[str, typer.Option(help="float32, float16 or bfloat16")] = "float32",
    device: Annotated[
        str, typer.Option(help="where programs run: auto (the GPU if there is one), cuda, cpu")
    ] = "auto",
    runtime: Annotated[
        bool, typer.Option(help="run the programs (--no-runtime: static filters and the meta probe only)")
    ] = True,
    compile_: Annotated[
        bool | None,
        typer.Option("--compile/--no-compile", help="the torch.compile filter (default: on a GPU only)"),
    ] = None,
    window: Annotated[
        str, typer.Option(help="eager time on the GPU a task must take, LOW,HIGH in ms")
    ] = "1,100",
    near: Annotated[
        float, typer.Option(help="similarity at which a program is a near-duplicate (0-1]")
    ] = 0.9,
    against: Annotated[
        list[Path] | None,
        typer.Option(help="a KernelBench tree to decontaminate against (default: the fetched one)"),
    ] = None,
    decontaminate: Annotated[
        bool, typer.Option(help="--no-decontaminate: keep tasks near KernelBench")
    ] = True,
    task_audit: Annotated[
        bool, typer.Option(help="also the judge's task audit on each task (about 5 s a task at CPU sizes)")
    ] = False,
    timeout: Annotated[float, typer.Option(help="seconds one candidate's checks may take")] = 300.0,
    host_memory: Annotated[float, typer.Option(help="GiB of host memory one candidate may use")] = 8.0,
    gpu_memory: Annotated[
        float, typer.Option(help="GiB of GPU memory one candidate may use (at most its share of the GPU)")
    ] = 16.0,
    workers: Annotated[
        int | None, typer.Option(help="candidates checked at once (default: CPUs; 8 on a GPU)")
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Compose reference programs from seed operators, keep the sound ones, write a dataset.

    OUT/tasks.jsonl (and tasks.parquet) load with `cuda-agent tasks list --tasks OUT/tasks.jsonl`;
    OUT/rejected.jsonl says why each other candidate was dropped. Interrupted, it continues where it
    stopped when run again with the same options."""
    settings, gpus = guarded(
        _settings, as_json=json, count=count, seed=seed, composer=composer, base_url=base_url, model=model,
        api_key_env=api_key_env, max_ops=max_ops, dtype=dtype, device=device, runtime=runtime,
        compile_=compile_, window=window, near=near, against=against, decontaminate=decontaminate,
        task_audit=task_audit, timeout=timeout, host_memory=host_memory, gpu_memory=gpu_memory,
    )  # fmt: skip
    shown = _Shown(quiet=json)

    async def work() -> SynthesisReport:
        with shown:
            return await synthesize(settings, out_dir, workers=workers, gpus=gpus, progress=shown.update)

    report = run_async(work, as_json=json)
    if json:
        emit_json(report)
        return
    _render(report)


def _settings(
    *, count: int, seed: int, composer: str, base_url: str | None, model: str | None, api_key_env: str,
    max_ops: int, dtype: str, device: str, runtime: bool, compile_: bool | None, window: str, near: float,
    against: list[Path] | None, decontaminate: bool, task_audit: bool, timeout: float, host_memory: float,
    gpu_memory: float,
) -> tuple[SynthesisSettings, list[str]]:  # fmt: skip
    resolved, gpus = _device(device)
    try:
        low, high = (float(part) for part in window.split(","))
    except ValueError:
        raise UsageError(f"--window must be LOW,HIGH in milliseconds (e.g. 1,100), not {window!r}") from None
    if not 0 <= low < high:
        raise UsageError(f"--window must be LOW,HIGH with 0 <= LOW < HIGH, not {window}")
    llm = None
    if composer == "llm":
        if not base_url or not model:
            raise UsageError("--composer llm needs --base-url and --model")
        llm = LlmComposerSettings(base_url=base_url, model=model, api_key_env=api_key_env)
    roots: list[str] = []
    if decontaminate:
        # A checkout's root holds the tree in KernelBench/ (as `tasks fetch` leaves it).
        roots = [
            str((p / "KernelBench" if (p / "KernelBench").is_dir() else p).resolve()) for p in against or []
        ]
        if not roots:
            fetched = fetched_tree()
            if fetched is None:
                raise UsageError(
                    "no KernelBench tree to decontaminate against: run `cuda-agent tasks fetch`, or pass "
                    "--against DIR (a KernelBench checkout), or --no-decontaminate"
                )
            roots = [str(fetched)]
        for root in roots:
            if not Path(root).is_dir():
                raise UsageError(f"--against {root}: no such directory")
    settings = SynthesisSettings(
        count=count, seed=seed, composer=composer, max_ops=max_ops, dtype=dtype, device=resolved,  # type: ignore[arg-type]
        runtime=runtime, compile=resolved == "cuda" if compile_ is None else compile_, window_ms=(low, high),
        near_threshold=near, against=tuple(roots), task_audit=task_audit, timeout_s=timeout, llm=llm,
        host_memory_bytes=int(host_memory * 1024**3), gpu_memory_bytes=int(gpu_memory * 1024**3),
    )  # fmt: skip
    return settings, gpus


def _device(device: str) -> tuple[Literal["cpu", "cuda"], list[str]]:
    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"--device must be auto, cuda or cpu, not {device!r}")
    if device == "cpu":
        return "cpu", []
    absent = gpu_absence()
    gpus = [str(g.index) for g in gpu_specs().gpus] if absent is None else []
    if gpus:
        return "cuda", gpus
    if device == "cuda":
        raise GpuUnavailable(absent or "nvidia-smi lists no GPU")
    return "cpu", []


class _Shown:
    """Progress on stderr: a bar with the drops so far on a terminal, else a line every 10 s."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.last_plain = 0.0

    def __enter__(self) -> _Shown:
        if not self.quiet and err.is_interactive:
            self.bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[drops]}"), console=err, transient=False,
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("composing", total=None, drops="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, progress: SynthesisProgress) -> None:
        drops = ", ".join(f"{name} -{n}" for name, n in progress.dropped.items())
        kept = f"{progress.accepted} kept" if progress.phase in ("check", "write") else ""
        detail = "; ".join(filter(None, [kept, drops]))
        if self.bar is not None and self.task is not None:
            self.bar.update(
                self.task,
                description=progress.phase,
                completed=progress.done,
                total=progress.total,
                drops=detail,
            )
            return
        now = time.monotonic()
        if self.quiet or (now - self.last_plain < _PLAIN_EVERY_S and progress.done < progress.total):
            return
        self.last_plain = now
        err.print(
            f"{progress.phase}: {progress.done}/{progress.total}" + (f" ({detail})" if detail else ""),
            highlight=False,
        )


def _render(report: SynthesisReport) -> None:
    out.print(
        f"{'filter':<16} {'entered':>8} {'passed':>8} {'dropped':>8} {'skipped':>8}  commonest reason",
        highlight=False,
    )
    for count in report.filters:
        if count.entered == 0:
            continue
        reason = count.top_reasons[0] if count.top_reasons else ""
        out.print(
            f"{count.name:<16} {count.entered:>8} {count.passed:>8} {count.dropped:>8} {count.skipped:>8}  {reason}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    share = report.accepted / report.candidates if report.candidates else 0.0
    out.print(
        f"{report.accepted} of {report.candidates} candidates accepted ({share:.1%}) in {report.seconds['total']:.1f} s "
        f"({report.seconds_per_candidate:.2f} s a candidate)",
        highlight=False,
    )
    for note in report.notes:
        out.print(f"note: {note}", highlight=False)
    out.print(f"dataset: {report.files['tasks_jsonl']}", highlight=False, soft_wrap=True)
    if report.files.get("tasks_parquet") is None:
        out.print("no tasks.parquet: pip install 'cuda-agent-mcp[parquet]' for it", highlight=False)
