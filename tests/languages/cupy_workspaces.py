"""CuPy-language workspaces for tests: the ReLU task with kernels/*.cu and a model_new.py launching them."""

from __future__ import annotations

import shutil
from pathlib import Path

from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from tests.conftest import EXAMPLES, REPO

CUPY_RELU = REPO / "benchmarks" / "cupy_relu"
RELU_CU = (CUPY_RELU / "kernels" / "relu.cu").read_text()
RELU_MODEL_NEW = (CUPY_RELU / "model_new.py").read_text()

SIMPLE_KERNEL = """extern "C" __global__ void relu_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}
"""


def simple_model_new(launch: str = "cuda_extension.relu_kernel((n + 255) // 256, 256, (x, y, n))") -> str:
    return f"""import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        {launch}
        return y
"""


def cupy_session(
    root: Path, cache: Path, *, kernels: dict[str, str] | None = None, model_new: str | None = None
) -> Session:
    """The ReLU example's task in a CuPy workspace: the bundled float4 ReLU, or the files given."""
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    session = Session.create(task, root / "ws", cache_dir=cache, language="cupy")
    folder = session.workspace.root / "kernels"
    if kernels is None:
        shutil.copy(CUPY_RELU / "kernels" / "relu.cu", folder / "relu.cu")
    else:
        for name, text in kernels.items():
            (folder / name).write_text(text)
    (session.workspace.root / "model_new.py").write_text(RELU_MODEL_NEW if model_new is None else model_new)
    return session
