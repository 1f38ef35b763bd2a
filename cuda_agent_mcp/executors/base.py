"""The Executor protocol and the types of one process run with limits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class ProcessLimits(BaseModel):
    """Limits applied to one process (and everything it starts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_s: float = Field(
        default=120.0, gt=0, description="wall-clock limit; the whole process group is killed"
    )
    max_output_bytes: int = Field(
        default=8 * 1024 * 1024, gt=0, description="combined stdout+stderr after which the process is killed"
    )
    keep_output_bytes: int = Field(
        default=128 * 1024, gt=0, description="how much output is kept; the rest is cut with a marker"
    )


class ProcessResult(BaseModel):
    """What happened to one process. `returncode` is None when it was killed by us."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: list[str]
    returncode: int | None
    output: str = Field(description="stdout and stderr interleaved, truncated to keep_output_bytes")
    output_truncated: bool = False
    timed_out: bool = False
    output_limit_hit: bool = False
    wall_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.output_limit_hit


class Executor(Protocol):
    """Runs one command under limits. Backends: local process, sandboxed process, Docker container.

    `cwd` is the one place the command may write; `readable` lists what else it needs to read (the
    toolchain, a cache's objects). Backends with a filesystem view (Docker) show it nothing more."""

    name: str

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
    ) -> ProcessResult: ...
