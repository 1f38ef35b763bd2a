"""Triton-language workspaces for tests: the ReLU task with @triton.jit kernels in model_new.py."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from tests.conftest import EXAMPLES

RELU_KERNEL = """@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)
"""


def triton_model_new(
    kernel: str = RELU_KERNEL,
    launch: str = "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)",
    imports: str = "",
) -> str:
    """model_new.py: the imports, `kernel` (at line 8 onwards), and a ModelNew whose forward runs `launch`."""
    return f"""import torch
import torch.nn as nn
import triton
import triton.language as tl
{imports}

# kernels
{kernel}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        {launch}
        return y
"""


def triton_session(
    root: Path, cache: Path, *, model_new: str | None = None, files: dict[str, str] | None = None
) -> Session:
    """The ReLU example's task in a Triton workspace, with `model_new` (the ReLU above by default)."""
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    session = Session.create(task, root / "ws", cache_dir=cache, language="triton")
    (session.workspace.root / "model_new.py").write_text(
        triton_model_new() if model_new is None else model_new
    )
    for name, text in (files or {}).items():
        (session.workspace.root / name).write_text(text)
    return session
