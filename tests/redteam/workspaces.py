"""Red-team workspaces: the ReLU example with one file swapped for an exploit.

Every case reuses the example's binding, so only the swapped kernel (about 1 s of nvcc) or nothing at
all is rebuilt. `tests/exploits/manifest.py` maps each case to its entry in the shared catalog.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio

from cuda_agent_mcp.results import ProfileResult, VerifyResult
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import ProfileRequest, Session, VerifyRequest, profile_kernels, verify_kernels
from tests.conftest import EXAMPLES

HEADER = "#include <cuda_runtime.h>\n#include <cstdint>\n"
RELU_KERNEL = """
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}
"""
HONEST_LAUNCH = "  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);"
EXAMPLE_MODEL_NEW = (EXAMPLES / "relu" / "model_new.py").read_text()
HONEST_CALL = "        return cuda_extension.relu(x)"


def launcher(body: str) -> str:
    return f'extern "C" void relu_launcher(const float* x, float* y, int64_t n, cudaStream_t stream) {{\n{body}\n}}\n'


def forward(body: str, *, prelude: str = "") -> str:
    """The example's model_new.py with forward()'s body replaced (and code added after the imports)."""
    text = EXAMPLE_MODEL_NEW.replace(HONEST_CALL, body)
    return text.replace("import cuda_extension\n", f"import cuda_extension\n{prelude}\n") if prelude else text


def relu_session(
    tmp_path: Path,
    cache: Path,
    *,
    kernel: str | None = None,
    model_new: str | None = None,
    binding: str | None = None,
    task_file: Path | None = None,
) -> Session:
    """The ReLU example's workspace, with any of its files replaced (`task_file`: the task at another size)."""
    task = load_task_file(task_file or EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    session = Session.create(task, tmp_path / "ws", cache_dir=cache)
    kernels = session.workspace.root / "kernels"
    shutil.copytree(EXAMPLES / "relu" / "kernels", kernels, dirs_exist_ok=True)
    shutil.copy(EXAMPLES / "relu" / "model_new.py", session.workspace.root / "model_new.py")
    if kernel is not None:
        (kernels / "relu.cu").write_text(HEADER + kernel)
    if binding is not None:
        (kernels / "relu_binding.cpp").write_text(binding)
    if model_new is not None:
        (session.workspace.root / "model_new.py").write_text(model_new)
    return session


def verify(session: Session, **options: object) -> VerifyResult:
    return anyio.run(lambda: verify_kernels(session, VerifyRequest(**options)))  # type: ignore[arg-type]


def profile(session: Session, **options: object) -> ProfileResult:
    return anyio.run(lambda: profile_kernels(session, ProfileRequest(**options)))  # type: ignore[arg-type]
