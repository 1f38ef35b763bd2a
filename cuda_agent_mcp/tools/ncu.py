"""The profile's optional `ncu` detail pass: Nsight Compute metrics per kernel, for the agent to act on.

After the trusted timing has decided the verdict, one more process runs the candidate once under
`ncu --profile-from-start off` (worker/ncu_target.py), inside the isolating executor and under an
exclusive GPU lease (kernel replay would disturb anyone else's timing). Its output is parsed from
`--csv --page raw`. Nothing here changes a verdict, a timing or a reward: the profiled process runs
the candidate's code and could print anything.
"""

from __future__ import annotations

import csv
import io
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent_mcp.evaluation.kernel_names import kernel_identity, library_lookalike
from cuda_agent_mcp.executors import ProcessLimits, isolating_executor
from cuda_agent_mcp.executors.local import scrubbed_env
from cuda_agent_mcp.results import NcuKernel, NcuReport
from cuda_agent_mcp.tools.run import runtime_paths
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.wire import NCU_TARGET_MODULE, module_file
from cuda_agent_mcp.workspace.layout import REFERENCE_FILE

TARGET = module_file(NCU_TARGET_MODULE)
MAX_KERNELS = 50

# ncu metric -> NcuKernel field
METRICS = {
    "gpu__time_duration.sum": "duration_us",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__shared_mem_per_block_static": "static_shared_memory_bytes",
    "launch__shared_mem_per_block_dynamic": "dynamic_shared_memory_bytes",
}
_INTEGER_FIELDS = {"registers_per_thread", "static_shared_memory_bytes", "dynamic_shared_memory_bytes"}
_TO_MICROSECONDS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def find_ncu() -> Path | None:
    found = shutil.which("ncu")
    if found:
        return Path(found)
    for candidate in (
        "/usr/local/cuda/bin/ncu",
        *sorted(map(str, Path("/opt/nvidia").glob("nsight-compute/*/ncu"))),
    ):
        if Path(candidate).is_file():
            return Path(candidate)
    return None


def ncu_command(ncu: Path, python: str, reference_dir: Path, candidate_dir: Path, seed: int) -> list[str]:
    return [
        # --clock-control none: measure at the clocks the GPU runs at, and leave a shared GPU's clocks alone.
        str(ncu), "--csv", "--page", "raw", "--print-units", "base", "--profile-from-start", "off",
        "--clock-control", "none",
        "--launch-count", str(MAX_KERNELS), "--metrics", ",".join(METRICS),
        python, str(candidate_dir.parent / TARGET.name), str(reference_dir), str(candidate_dir), str(seed),
    ]  # fmt: skip


def parse_ncu_csv(output: str, workspace_kernels: set[str]) -> list[NcuKernel]:
    """Kernels from `ncu --csv --page raw` output: a header row, a units row, one row per launch.
    Lines before the header (the program's own output, ncu's ==PROF== notes) are skipped."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, launches = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    column = {name: index for index, name in enumerate(header)}
    ours = {
        kernel_identity(name) for name in workspace_kernels if not library_lookalike(name)
    }  # ptxas and ncu spell signatures differently
    kernels = []
    for row in launches:
        if len(row) != len(header):
            continue
        name = row[column["Kernel Name"]] if "Kernel Name" in column else "?"
        values: dict[str, Any] = {}  # float or int by metric, None when not reported
        for metric, field in METRICS.items():
            index = column.get(metric)
            values[field] = (
                _number(row[index], units[index] if index < len(units) else "", field)
                if index is not None
                else None
            )
        kernels.append(
            NcuKernel(
                name=name,
                from_workspace=kernel_identity(name) in ours,
                grid=row[column["Grid Size"]] if "Grid Size" in column else "",
                block=row[column["Block Size"]] if "Block Size" in column else "",
                **values,
            )
        )
    return kernels[:MAX_KERNELS]


def _number(text: str, unit: str, field: str) -> float | int | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    if field in _INTEGER_FIELDS:
        return int(value)
    if field == "duration_us":
        return round(value * _TO_MICROSECONDS.get(unit.strip(), 1e-3), 3)
    return round(value, 2)


async def ncu_pass(
    session: Session,
    stage_candidate: Callable[[Path], None],
    workspace_kernels: set[str],
    *,
    scratch_root: Path,
    gpu: int | None,
    timeout_s: float,
) -> NcuReport:
    """Profile one call of the staged candidate with Nsight Compute; a report saying why when it cannot."""
    started = time.monotonic()
    ncu = find_ncu()
    if ncu is None:
        return NcuReport(note="Nsight Compute (ncu) is not installed on the evaluation machine")
    with tempfile.TemporaryDirectory(prefix="cuda-agent-ncu-", dir=scratch_root) as tmp:
        scratch = Path(tmp)
        (scratch / "reference").mkdir()
        (scratch / "reference" / REFERENCE_FILE).write_text(session.workspace.reference_code)
        candidate = scratch / "candidate"
        candidate.mkdir()
        stage_candidate(candidate)
        shutil.copy(TARGET, scratch / TARGET.name)
        argv = ncu_command(ncu, sys.executable, scratch / "reference", candidate, secrets.randbits(31))
        inherited = os.environ.get("PYTHONPATH", "")
        extra = {"PYTHONPATH": inherited} if inherited else {}
        if gpu is not None:
            extra["CUDA_VISIBLE_DEVICES"] = str(gpu)
        result = await isolating_executor(session.executor).run(
            argv,
            cwd=scratch,
            limits=ProcessLimits(timeout_s=timeout_s),
            env=scrubbed_env(extra),
            readable=[ncu.resolve().parent.parent, *runtime_paths(inherited)],
        )
    kernels = parse_ncu_csv(result.output, workspace_kernels)
    note = ""
    if result.timed_out:
        note = f"ncu took longer than {timeout_s:.0f} s and was stopped"
    elif not kernels:
        tail = "\n".join(result.output.strip().splitlines()[-8:])
        note = f"ncu measured no kernel (exit status {result.returncode}): {tail[-1500:]}"
    return NcuReport(kernels=kernels, note=note, wall_s=round(time.monotonic() - started, 3))
