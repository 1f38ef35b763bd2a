"""Hopper builds target sm_90a by default, so warpgroup MMA (wgmma) compiles; a plain sm_90 build
refuses it with a diagnostic (real nvcc, no GPU needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.build import flags
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels
from cuda_agent_mcp.tools.build import CompileRequest
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc

# One m64n8k16 warpgroup MMA from shared-memory descriptors: instructions that exist only on sm_90a.
WGMMA = r"""
#include <cstdint>
__global__ void wgmma_probe_kernel(float* out, uint64_t a, uint64_t b) {
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(a), "l"(b));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i];
}
"""


def wgmma_session(directory: Path, cache: Path) -> Session:
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    session = Session.create(task, directory, cache_dir=cache)
    shutil.copytree(EXAMPLES / "relu" / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLES / "relu" / "model_new.py", session.workspace.root / "model_new.py")
    (session.workspace.root / "kernels" / "wgmma_probe.cu").write_text(WGMMA)
    return session


def test_a_build_without_a_visible_gpu_targets_sm_90a_and_compiles_wgmma(
    tmp_path: Path, shared_build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(flags.ARCH_ENV, raising=False)
    which = shutil.which
    monkeypatch.setattr(  # no nvidia-smi: the machine has no GPU to ask
        flags.shutil,
        "which",
        lambda name, *args, **kwargs: None if name == "nvidia-smi" else which(name, *args, **kwargs),
    )
    session = wgmma_session(tmp_path / "ws", shared_build_cache)
    result = anyio.run(compile_kernels, session)
    assert result.ok, result.summary + "\n" + result.log
    assert result.arch == "sm_90a"
    probe = [k for k in result.kernels if k.name.startswith("wgmma_probe_kernel")]
    assert [k.arch for k in probe] == ["sm_90a"]


def test_a_plain_sm_90_build_refuses_wgmma_with_a_diagnostic(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    session = wgmma_session(tmp_path / "ws", shared_build_cache)
    result = anyio.run(lambda: compile_kernels(session, CompileRequest(arch="sm_90")))
    assert not result.ok and result.failure == "compile_error"
    assert any("wgmma" in d.message for d in result.diagnostics), result.diagnostics
