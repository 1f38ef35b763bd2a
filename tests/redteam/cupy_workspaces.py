"""Red-team workspaces in the cupy language: the contract's ReLU with one file swapped for an exploit.

`cupy_session` lays out a cupy workspace through `Session.create(..., language="cupy")`; `audit` runs
the static audit alone on such a workspace written by hand (no build, no session), for the exploits the
audit must refuse however the rest of the evaluation is built.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.results import AuditFinding
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from tests.conftest import EXAMPLES

RELU_CU = """extern "C" __global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
LAUNCH = "        cuda_extension.relu_kernel((n + 255) // 256, 256, (x, y, n))"
MODEL_NEW = """import torch
import torch.nn as nn

import cuda_extension
{prelude}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
{body}
        return y
"""


def model_new(body: str = LAUNCH, *, prelude: str = "", init: str = "") -> str:
    """The contract's ReLU model_new.py with forward()'s launch replaced (and code added)."""
    return MODEL_NEW.format(prelude=prelude, init=init, body=body)


def write_workspace(
    root: Path, *, kernels: dict[str, str] | None = None, files: dict[str, str | bytes] | None = None
) -> Path:
    """A cupy workspace by hand: .cuda-agent/workspace.json, kernels/, model_new.py, and `files`
    (relative path -> contents) written over them."""
    meta = root / ".cuda-agent" / "workspace.json"
    if not meta.exists():  # Session.create wrote its own
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"language": "cupy"}) + "\n")
    (root / "kernels").mkdir(exist_ok=True)
    for name, text in (kernels if kernels is not None else {"relu.cu": RELU_CU}).items():
        (root / "kernels" / name).write_text(text)
    (root / "model_new.py").write_text(model_new())
    for relpath, contents in (files or {}).items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(contents, bytes):
            path.write_bytes(contents)
        else:
            path.write_text(contents)
    return root


def audit(root: Path) -> list[AuditFinding]:
    """The static audit as verify runs it on a CuPy workspace whose build made `relu_kernel`."""
    return audit_workspace(root, (), extension_kernels=["relu_kernel"])


def cupy_session(
    tmp_path: Path,
    cache: Path,
    *,
    kernels: dict[str, str] | None = None,
    files: dict[str, str | bytes] | None = None,
) -> Session:
    """A session on a cupy workspace holding the contract's ReLU, then `kernels` (replacing kernels/)
    and `files` (relative path -> contents, model_new.py included) written over it."""
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    try:
        session = Session.create(task, tmp_path / "ws", cache_dir=cache, language="cupy")
    except TypeError as exc:  # the branch predates the cupy core (Session.create has no language)
        pytest.skip(f"the cupy language is not on this branch: {exc}")
    root = session.workspace.root
    shutil.rmtree(root / "kernels", ignore_errors=True)
    (root / "model_new.py").unlink(missing_ok=True)
    write_workspace(root, kernels=kernels, files=files)
    return session
