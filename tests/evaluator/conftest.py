"""Run the judge on the CPU: the whole judge/worker protocol, with pure-PyTorch candidates."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pytest

from cuda_agent_mcp.evaluation.job import EvalJob, JudgeReport, Timeouts, TimingPolicy
from cuda_agent_mcp.judge.run import run_job
from cuda_agent_mcp.judge.worker_client import WorkerPool

REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * self.scale)

def get_inputs():
    return [torch.rand(64, 32)]

def get_init_inputs():
    return [32]
"""

HONEST = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return (x * self.scale).clamp_min(0)
"""


def honest_running(code: str) -> str:
    """HONEST with `code` run in its forward before it returns the right answer (a probe or a fault)."""
    indented = "".join(f"        {line}\n" for line in code.strip().splitlines())
    return HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        indented + "        return (x * self.scale).clamp_min(0)",
    )


# A constructor that never returns: a load timeout.
SLEEPS_IN_INIT = HONEST.replace(
    "        super().__init__()", "        super().__init__()\n        import time\n        time.sleep(3600)"
)


def judge(
    tmp_path: Path,
    candidate: str,
    *,
    reference: str = REFERENCE,
    mode: str = "verify",
    workers: WorkerPool | None = None,
    files: dict[str, Path] | None = None,
    **job: object,
) -> JudgeReport:
    """Write a reference and a candidate (plus `files`: name -> file copied beside it), then run one judge job in this
    process: on the CPU unless the job says otherwise, with forked workers unless a pool is given."""
    ref = tmp_path / "reference" / "model.py"
    ref.parent.mkdir(exist_ok=True)
    ref.write_text(reference)
    cand = tmp_path / "candidate"
    cand.mkdir(exist_ok=True)
    (cand / "model_new.py").write_text(candidate)
    for name, source in (files or {}).items():
        shutil.copy(source, cand / name)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    fields: dict[str, object] = {
        "mode": mode,
        "reference_path": str(ref),
        "candidate_dir": str(cand),
        "device": "cpu",
        "seeds": [secrets.randbits(62) for _ in range(4)],
        "init_seed": 7,
        "atol": 1e-2,
        "rtol": 1e-2,
        "baselines": "skip",
        "timing": TimingPolicy(min_samples=5, max_samples=8, budget_s=1.0),
        "timeouts": Timeouts(load_s=60, call_s=10),
    }
    spec = EvalJob.model_validate({**fields, **job})
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    return run_job(spec, scratch, env, workers)


@pytest.fixture
def run_judge(tmp_path: Path):
    return lambda candidate, **kw: judge(tmp_path, candidate, **kw)
