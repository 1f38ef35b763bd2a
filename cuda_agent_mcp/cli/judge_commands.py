"""`cuda-agent judges`: the user's judge service (warm judges shared by every command), its state and its end."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict

from cuda_agent_mcp.build import default_cache_dir
from cuda_agent_mcp.cli.common import emit_json, guarded, help_markup, out
from cuda_agent_mcp.evaluation.judge_client import query_status, stop_service
from cuda_agent_mcp.evaluation.service_wire import ServiceStatus, code_fingerprint, service_mode, socket_path

judges_app = typer.Typer(
    help="The judge service: warm judges every command reuses.",
    no_args_is_help=True,
    rich_markup_mode=help_markup(),
)
JsonOption = Annotated[bool, typer.Option("--json", help="print the result as JSON")]


class JudgeServiceState(BaseModel):
    """What `judges status` and `judges stop` report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    running: bool
    socket: str
    mode: str
    current_code: bool | None = None
    stopped: bool = False
    status: ServiceStatus | None = None


@judges_app.command("status")
def judges_status(json: JsonOption = False) -> None:
    """Whether a judge service runs for this user and cache directory, and what it holds."""
    path = guarded(lambda: socket_path(default_cache_dir()), as_json=json)
    status = query_status(path)
    state = JudgeServiceState(
        running=status is not None,
        socket=str(path),
        mode=service_mode(),
        current_code=None if status is None else status.code == code_fingerprint(),
        status=status,
    )
    if json:
        emit_json(state)
        return
    if status is None:
        out.print(
            f"no judge service runs for this cache ({path}); evaluation commands start one on a GPU machine"
        )
        return
    age = time.time() - status.started_at
    code = "this code" if state.current_code else "other code (the next evaluation command replaces it)"
    out.print(
        f"judge service pid {status.pid}, up {age:.0f} s, {code}: {status.jobs_run} jobs run, "
        f"{status.jobs_running} running; judges {status.judges_idle} idle, {status.judges_started} started, "
        f"{status.judges_retired} retired; ends after {status.idle_timeout_s:.0f} s idle; logs in {status.log_dir}"
    )


@judges_app.command("stop")
def judges_stop(json: JsonOption = False) -> None:
    """End the judge service (running jobs finish first; the next evaluation command starts a new one)."""
    path = guarded(lambda: socket_path(default_cache_dir()), as_json=json)
    stopped = stop_service(path)
    state = JudgeServiceState(running=False, socket=str(path), mode=service_mode(), stopped=stopped)
    if json:
        emit_json(state)
        return
    out.print("judge service stopped" if stopped else f"no judge service was running ({path})")
