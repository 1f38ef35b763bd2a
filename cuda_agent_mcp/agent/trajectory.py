"""Trajectories: one JSONL file per run, one record per line, written as the run goes (a crash loses
at most the record being written). The RL issue's rejection fine-tuning loads them with
`load_trajectory`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

FORMAT_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Header(_Record):
    type: Literal["header"] = "header"
    format_version: int = FORMAT_VERSION
    task_id: str
    reference_hash: str
    policy: dict[str, Any]
    environment: dict[str, Any]
    sampling: dict[str, Any]
    started_at: str
    resumed_from: str | None = None


class MessageRecord(_Record):
    type: Literal["message"] = "message"
    turn: int
    message: dict[str, Any] = Field(description="the message as sent to or received from the endpoint")
    usage: dict[str, int] = Field(default_factory=dict)
    latency_s: float | None = None


class ToolRecord(_Record):
    type: Literal["tool"] = "tool"
    turn: int
    call_id: str
    name: str
    arguments: str
    valid: bool
    error: str | None = None
    infra_error: bool = Field(
        default=False, description="the environment failed, not the policy: mask it when training"
    )
    attempts: int = Field(default=1, description="tries it took: infrastructure failures are retried")
    result: dict[str, Any] | None = None
    wall_s: float = 0.0
    reward: float | None = None
    verified: bool = False
    code_hash: str | None = Field(default=None, description="hash of the editable files when this call ran")


class Best(_Record):
    reward: float | None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    code_hash: str
    files: dict[str, str]
    turn: int


class RunTotals(BaseModel):
    """How a run ended and what it used: the end record's and the loop result's common part."""

    stop_reason: str
    truncated: bool = Field(
        default=False,
        description="a limit from outside ended the run (budget, invalid calls, infrastructure, endpoint), "
        "not the policy (evaluate, or no more tool calls)",
    )
    turns: int
    tokens: int
    wall_s: float
    gpu_s: float
    invalid_calls: int
    best: Best | None
    error: str | None = Field(default=None, description="what ended the run when it was not the policy")


class EndRecord(RunTotals, _Record):
    type: Literal["end"] = "end"
    last_files: dict[str, str] = Field(default_factory=dict, description="the workspace before restoring")


Record = Annotated[Header | MessageRecord | ToolRecord | EndRecord, Field(discriminator="type")]
_RECORD: TypeAdapter[Header | MessageRecord | ToolRecord | EndRecord] = TypeAdapter(Record)


class Trajectory(BaseModel):
    header: Header
    messages: list[MessageRecord]
    tools: list[ToolRecord]
    end: EndRecord | None

    def conversation(self) -> list[dict[str, Any]]:
        return [m.message for m in self.messages]


class TrajectoryWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: _Record) -> None:
        self._file.write(record.model_dump_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TrajectoryError(ValueError):
    pass


def load_trajectory(path: Path) -> Trajectory:
    """Parse a trajectory; a torn last line (the run was killed mid-write) is ignored."""
    header: Header | None = None
    messages: list[MessageRecord] = []
    tools: list[ToolRecord] = []
    end: EndRecord | None = None
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = _RECORD.validate_python(json.loads(line))
        except ValueError as exc:
            if number == len(lines):
                break
            raise TrajectoryError(f"{path}:{number}: not a trajectory record ({str(exc)[:200]})") from None
        if isinstance(record, Header):
            header = header or record
        elif isinstance(record, MessageRecord):
            messages.append(record)
        elif isinstance(record, ToolRecord):
            tools.append(record)
        else:
            end = record
    if header is None:
        raise TrajectoryError(f"{path}: no header record")
    return Trajectory(header=header, messages=messages, tools=tools, end=end)
