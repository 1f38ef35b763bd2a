"""Run a reference program's entry points on the meta device, in a child process, to check what they return.

Inputs are made on `meta`, so a task whose inputs are many gigabytes costs nothing to inspect, and the
reference never runs inside the caller's process. The child spends seconds importing torch (6-11 s on a
cold disk), so a report is kept in the cache directory under what decides it: the reference's code, the
torch version and the probe's own code. `tasks show` then `workspace new` pay for one probe, not two.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.cache_dir import default_cache_dir
from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.executors import LocalExecutor, ProcessLimits
from cuda_agent_mcp.executors.local import child_python_path, scrubbed_env
from cuda_agent_mcp.tasks.model import Task

PROBE_MARKER = "@@cuda-agent-probe@@"


class InputSpec(BaseModel):
    """One element of get_inputs(): a tensor's shape and dtype, or a plain value's type."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str  # "tensor" or the Python type name
    shape: list[int] | None = None
    dtype: str | None = None
    value: str | None = None


class HiddenSize(BaseModel):
    """One size global the verify's hidden-size trial grows (judge/sizes.py), and to what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    visible: int | tuple[int, ...]
    hidden: int | tuple[int, ...]


class ProbeReport(BaseModel):
    """What the probe found. `error` is set when an entry point failed; the loader turns it into TaskLoadError."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inputs: list[InputSpec] = []
    init_inputs: list[str] = []
    parameter_count: int | None = None
    hidden_sizes: list[HiddenSize] = Field(
        default_factory=list,
        description="the size globals the hidden-size trial grows, as the judge works them out; empty: "
        "that trial uses the task's own inputs",
    )
    error: str | None = None


async def probe_task(task: Task, *, timeout_s: float = 120.0) -> ProbeReport:
    """Check that Model builds and get_inputs() returns tensors; raise TaskLoadError if not."""
    kept = _kept_report_path(task)
    try:
        return ProbeReport.model_validate_json(kept.read_text())
    except (OSError, ValueError):
        pass  # not probed yet (or an unreadable file): probe now
    report = await _probe(task, timeout_s=timeout_s)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(report.model_dump_json())
        partial.replace(kept)  # atomic: a concurrent reader sees the whole report or none
    except OSError:
        pass  # a read-only cache costs the next call a probe, nothing else
    return report


def _kept_report_path(task: Task) -> Path:
    """Where a successful report for this code, this torch and this probe is kept."""
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for part in (task.code, torch_version, sys.version):
        digest.update(part.encode() + b"\0")
    for code in (here / "probe.py", here / "_probe_child.py", here.parent / "judge" / "sizes.py"):
        digest.update(code.read_bytes() + b"\0")
    return default_cache_dir() / "probes" / f"{digest.hexdigest()}.json"


async def _probe(task: Task, *, timeout_s: float) -> ProbeReport:
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as tmp:
        model_path = Path(tmp) / "model.py"
        model_path.write_text(task.code)
        result = await LocalExecutor().run(
            [sys.executable, "-m", "cuda_agent_mcp.tasks._probe_child", str(model_path)],
            cwd=Path(tmp),
            limits=ProcessLimits(timeout_s=timeout_s),
            env=scrubbed_env({"PYTHONPATH": child_python_path(), "CUDA_VISIBLE_DEVICES": ""}),
        )
    location = task.source.path or task.id
    if result.timed_out:
        raise TaskLoadError(location, f"inspecting the task took longer than {timeout_s:.0f} s")
    lines = [ln for ln in result.output.splitlines() if ln.startswith(PROBE_MARKER)]
    if not lines:
        tail = result.output.strip()[-2000:]
        raise TaskLoadError(location, f"inspecting the task failed (exit {result.returncode}): {tail}")
    report = ProbeReport.model_validate_json(lines[-1][len(PROBE_MARKER) :])
    if report.error:
        raise TaskLoadError(location, report.error)
    return report
