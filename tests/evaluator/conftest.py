"""Run the judge on the CPU: the whole judge/worker protocol, with pure-PyTorch candidates."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from cuda_agent_mcp.evaluator.job import EvalJob, JudgeReport, Timeouts, TimingPolicy
from cuda_agent_mcp.evaluator.run import run_job

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


def judge(
    tmp_path: Path, candidate: str, *, reference: str = REFERENCE, mode: str = "verify", **job: object
) -> JudgeReport:
    """Write a reference and a candidate, then run one judge job on the CPU in this process."""
    ref = tmp_path / "reference" / "model.py"
    ref.parent.mkdir(exist_ok=True)
    ref.write_text(reference)
    cand = tmp_path / "candidate"
    cand.mkdir(exist_ok=True)
    (cand / "model_new.py").write_text(candidate)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    spec = EvalJob(
        mode=mode,  # type: ignore[arg-type]
        reference_path=str(ref),
        candidate_dir=str(cand),
        device="cpu",
        seeds=[secrets.randbits(62) for _ in range(4)],
        init_seed=7,
        atol=1e-2,
        rtol=1e-2,
        baselines="skip",
        timing=TimingPolicy(min_samples=5, max_samples=8, budget_s=1.0),
        **{"timeouts": Timeouts(load_s=60, call_s=10), **job},  # type: ignore[arg-type]
    )
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    return run_job(spec, scratch, env)


@pytest.fixture
def run_judge(tmp_path: Path):
    return lambda candidate, **kw: judge(tmp_path, candidate, **kw)
