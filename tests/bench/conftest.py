"""A tiny KernelBench-style task tree for suite runs on the CPU, its workspace solutions and a baseline
table for the CPU (torch.compile baselines cannot be measured in a CPU worker here: see docs/bench.md)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuda_agent_mcp.bench.baselines import (
    BaselineEntry,
    BaselineEnvironment,
    BaselineTable,
    local_environment,
)
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.results import TimingStats
from cuda_agent_mcp.tasks import load_kernelbench
from tests.conftest import EXAMPLES

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expression}


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

CANDIDATE = """import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expression}
"""

# task file -> (reference expression, solution: candidate expression, "missing" or "broken build")
TASKS = {
    "level1/1_ReLU.py": ("torch.relu(x)", "x.clamp_min(0)"),
    "level1/2_Tanh.py": ("torch.tanh(x)", "x * 2"),  # wrong output (returning x itself would alias its input)
    "level1/3_Fails.py": ("torch.relu(x) + undefined_name", "x.clamp_min(0)"),  # the reference itself fails
    "level1/4_Square.py": ("x * x", "missing"),
    "level2/1_Abs.py": ("torch.abs(x)", "broken build"),
}
EAGER_MS, COMPILED_MS = 0.5, 0.4  # the CPU table's figures: far slower than the tiny candidates


@dataclass
class TinySuite:
    tasks: Path
    solutions: Path
    tables: Path
    cache: Path


def stats(median_ms: float) -> TimingStats:
    return TimingStats(median_ms=median_ms, mean_ms=median_ms, min_ms=median_ms, p25_ms=median_ms,
                       p75_ms=median_ms, cv=0.01, samples=20)  # fmt: skip


def write_tiny_suite(root: Path, cache: Path) -> TinySuite:
    tasks, solutions, tables = root / "kb", root / "solutions", root / "tables"
    for relative, (reference, solution) in TASKS.items():
        path = tasks / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(REFERENCE.format(expression=reference))
        level, number = path.parent.name, path.name.split("_")[0]
        workspace = solutions / "kernelbench" / level / number
        if solution == "missing":
            continue
        shutil.copytree(EXAMPLES / "relu" / "kernels", workspace / "kernels")
        if solution == "broken build":
            (workspace / "kernels" / "relu.cu").write_text("this is not CUDA\n")
            solution = "x.abs()"
        (workspace / "model_new.py").write_text(CANDIDATE.format(expression=solution))
    stray = solutions / "kernelbench" / "level1" / "99"  # a solution for no task
    shutil.copytree(solutions / "kernelbench" / "level1" / "1", stray)
    environment = local_environment("cpu", cache)
    assert environment is not None
    import torch

    entries = {
        task.id: BaselineEntry(
            task_id=task.id,
            content_hash=task.content_hash,
            judge_gpu="cpu",
            judge_torch=torch.__version__,
            eager=stats(EAGER_MS),
            compiled=stats(COMPILED_MS),
            measured_at="2026-12-01T00:00:00+00:00",
            rules_version=VERDICT_RULES_VERSION,
        )
        for task in load_kernelbench(tasks)
        if "Fails" not in task.name
    }
    table = BaselineTable(environment=environment, entries=entries)
    tables.mkdir()
    (tables / f"{environment.slug()}.json").write_text(table.model_dump_json(indent=1))
    # A table of another machine is never loaded.
    other = BaselineTable(environment=BaselineEnvironment(gpu="NVIDIA H200", driver="1", cuda="1", torch="1"))
    (tables / "other.json").write_text(other.model_dump_json())
    return TinySuite(tasks=tasks, solutions=solutions, tables=tables, cache=cache)


@pytest.fixture
def tiny_suite(tmp_path: Path, shared_build_cache: Path, monkeypatch: pytest.MonkeyPatch) -> TinySuite:
    monkeypatch.setenv("CUDA_AGENT_STATE", str(tmp_path / "state"))  # this test's own journal
    cache = tmp_path / "cache"
    cache.mkdir()
    # Compiled objects are shared by the whole test run (torch-header compiles are paid once); the
    # journal and the judge's baseline cache are this test's own.
    for store in ("objects", "extensions"):
        (shared_build_cache / store).mkdir(parents=True, exist_ok=True)
        (cache / store).symlink_to(shared_build_cache / store)
    return write_tiny_suite(tmp_path, cache)
