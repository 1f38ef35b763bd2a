"""The filters that run a program: the meta-device shape probe, then (optionally) eager, determinism,
non-degeneracy, torch.compile and the GPU runtime window, in `_check_child.py` inside the isolating
executor. Candidates go in chunks (one torch import per chunk, one forked process per candidate); a
candidate the child could not report on is tried once more alone, then failed with what happened."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.executors import Executor, ProcessLimits
from cuda_agent_mcp.executors.local import child_python_path, scrubbed_env
from cuda_agent_mcp.synth._check_child import MARKER
from cuda_agent_mcp.synth.filters import FilterName, FilterOutcome
from cuda_agent_mcp.synth.gpu_executor import GpuCheckExecutor
from cuda_agent_mcp.tools.run import runtime_paths

_IMPORT_MARGIN_S = 90.0  # the chunk's own start: an interpreter, torch, CUDA's libraries from a cold disk


class CheckSettings(BaseModel):
    """How the running filters run; part of a run's settings (a change starts a new run)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: Literal["cpu", "cuda"]
    runtime: bool = Field(description="run the program (eager and after); False: the meta probe only")
    compile: bool = Field(description="the torch.compile filter (about 15 s a candidate)")
    seed: int = 0
    atol: float = 1e-2
    rtol: float = 1e-2
    timeout_s: float = Field(default=300.0, gt=0, description="per candidate, all its filters")
    host_memory_bytes: int = Field(default=8 * 1024**3, gt=0, description="per candidate (RLIMIT_DATA)")
    gpu_memory_bytes: int = Field(default=16 * 1024**3, gt=0, description="per candidate (torch's cap)")
    threads: int = Field(default=1, ge=1, description="torch threads per candidate")
    warmup: int = Field(default=3, ge=0)
    repeats: int = Field(default=10, ge=1)


class ChunkItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    code: str = Field(description="the program as it runs here (CPU sizes already applied)")
    probe_code: str | None = Field(
        default=None, description="the program at its own sizes, for the meta probe (None: `code`)"
    )


async def check_chunk(
    executor: Executor,
    items: Sequence[ChunkItem],
    settings: CheckSettings,
    *,
    scratch: Path,
    lock_path: Path | None,
    gpu: str | None = None,
) -> dict[int, list[FilterOutcome]]:
    """Every item's outcomes, in filter order (ending at its first refusal)."""
    results = await _run_chunk(executor, items, settings, scratch=scratch, lock_path=lock_path, gpu=gpu)
    for item in items:
        if item.index in results:
            continue
        # The chunk's process died or overran before reaching it: once more, alone.
        alone = await _run_chunk(executor, [item], settings, scratch=scratch, lock_path=lock_path, gpu=gpu)
        results[item.index] = alone.get(item.index) or [
            FilterOutcome(name="shape_probe", passed=False, reason=alone.get(-1, _NO_REPORT)[0].reason)
        ]
    results.pop(-1, None)
    return results


_NO_REPORT = [FilterOutcome(name="shape_probe", passed=False, reason="the checking process gave no report")]


async def _run_chunk(
    executor: Executor,
    items: Sequence[ChunkItem],
    settings: CheckSettings,
    *,
    scratch: Path,
    lock_path: Path | None,
    gpu: str | None,
) -> dict[int, list[FilterOutcome]]:
    directory = Path(tempfile.mkdtemp(prefix="synth-check-", dir=scratch))
    try:
        spec = {
            "device": settings.device,
            "stages": ["shape_probe", *(["runtime"] if settings.runtime else [])],
            "compile": settings.compile,
            "candidates": [item.model_dump() for item in items],
            "seed": settings.seed,
            "atol": settings.atol,
            "rtol": settings.rtol,
            "timeout_s": settings.timeout_s,
            "host_memory_bytes": settings.host_memory_bytes,
            "gpu_memory_bytes": settings.gpu_memory_bytes,
            "threads": settings.threads,
            "timing": {"warmup": settings.warmup, "repeats": settings.repeats},
            "lock_path": str(lock_path) if lock_path else None,
            # On a GPU the executor leaves confinement to the child, once CUDA is up (SandboxPolicy.gpu).
            "confine": {
                "readable": [str(p) for p in _readable(lock_path)],
                "writable": [str(directory)],
            }
            if _confines_itself(executor)
            else None,
        }
        (directory / "spec.json").write_text(json.dumps(spec))
        (directory / "tmp").mkdir()
        os.chmod(directory, 0o755)
        inherited = os.environ.get("PYTHONPATH", "")
        env = scrubbed_env(
            {
                "PYTHONPATH": child_python_path(inherited),
                "HOME": str(directory),
                "TMPDIR": str(directory / "tmp"),  # its own: all of /tmp is not the candidates' to write
                "TORCHINDUCTOR_CACHE_DIR": str(directory / "inductor"),
                "TRITON_CACHE_DIR": str(directory / "triton"),
                "TORCHINDUCTOR_COMPILE_THREADS": "1",  # candidates run in parallel already
                "OMP_NUM_THREADS": str(settings.threads),
                "CUDA_VISIBLE_DEVICES": gpu if settings.device == "cuda" and gpu is not None else "",
                "PYTHONDONTWRITEBYTECODE": "1",
                # The candidates' uid has no passwd entry: getpass (inductor's cache paths) reads these first.
                "USER": "cuda-agent",
                "LOGNAME": "cuda-agent",
            }
        )
        readable = _readable(lock_path)
        limits = ProcessLimits(timeout_s=_IMPORT_MARGIN_S + settings.timeout_s * len(items))
        argv = [sys.executable, "-m", "cuda_agent_mcp.synth._check_child", str(directory / "spec.json")]
        result = await executor.run(argv, cwd=directory, limits=limits, env=env, readable=readable)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    results: dict[int, list[FilterOutcome]] = {}
    for line in result.output.splitlines():
        if line.startswith(MARKER):
            try:
                report = json.loads(line[len(MARKER) :])
                results[int(report["index"])] = outcomes_of(report["events"])
            except (ValueError, KeyError, TypeError, ValidationError):
                continue  # a line the child did not finish: that candidate is tried again
    if not result.ok and len(results) < len(items):
        tail = [ln for ln in result.output.strip().splitlines() if not ln.startswith(MARKER)][-1:]
        what = "ran past its limit" if result.timed_out else f"exited with {result.returncode}"
        reason = f"the checking process {what}" + (f": {tail[0][:300]}" if tail else "")
        results[-1] = [FilterOutcome(name="shape_probe", passed=False, reason=reason)]
    return results


def _confines_itself(executor: Executor) -> bool:
    """Whether the executor leaves the Landlock domain to the child (the GPU one: see gpu_executor.py)."""
    return isinstance(executor, GpuCheckExecutor)


def _readable(lock_path: Path | None) -> list[Path]:
    """What the child reads: this package, this Python and torch (and the CUDA toolkit), the GPU lock's folder."""
    package_parent = Path(child_python_path("").split(os.pathsep)[0])
    paths = [package_parent, *runtime_paths(os.environ.get("PYTHONPATH", ""))]
    return [*paths, *([lock_path.parent] if lock_path else [])]


def outcomes_of(events: list[dict[str, object]]) -> list[FilterOutcome]:
    """The child's events as outcomes: a filter begun but never finished fails with what ended it."""
    outcomes: list[FilterOutcome] = []
    begun: FilterName = "shape_probe"
    for event in events:
        if "begin" in event:
            begun = FilterOutcome(name=event["begin"], passed=None).name  # type: ignore[arg-type]
        elif "outcome" in event:
            outcomes.append(FilterOutcome.model_validate(event["outcome"]))
        elif ("fatal" in event or "died" in event) and (not outcomes or outcomes[-1].name != begun):
            outcomes.append(
                FilterOutcome(name=begun, passed=False, reason=str(event.get("fatal") or event["died"]))
            )
    return outcomes
