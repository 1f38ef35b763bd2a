"""KernelEnv with `EnvironmentSettings(language="cupy")`: every reset lays out a CuPy workspace, the policy
is taught that language, and a compile step builds the kernel with NVRTC (on the CPU: no GPU needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.agent import EnvironmentSettings
from cuda_agent_mcp.env import KernelEnv, ToolCall
from cuda_agent_mcp.tasks import TaskCatalog
from tests.languages.cupy_workspaces import SIMPLE_KERNEL, simple_model_new

pytestmark = pytest.mark.nvcc

CUPY_CPU = EnvironmentSettings(language="cupy", device="cpu", audit=False, baselines="skip")


def _env(tmp_path: Path) -> KernelEnv:
    return KernelEnv(catalog=TaskCatalog(), settings=CUPY_CPU, root=tmp_path / "env")


def _write(path: str, content: str) -> ToolCall:
    return ToolCall(name="write_file", arguments={"path": path, "content": content})


def test_each_reset_lays_out_a_cupy_workspace_and_teaches_its_language(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for _ in range(2):  # a second episode is laid out the same way, in a fresh directory
        observation = anyio.run(env.reset, "examples/relu")
        assert env.session is not None
        root = env.session.workspace.root
        record = json.loads((root / ".cuda-agent" / "workspace.json").read_text())
        assert record["language"] == "cupy" and env.session.workspace.language == "cupy"
        assert "**cupy**" in (root / "SKILL.md").read_text()
        assert not (root / "binding.cpp").exists()
        assert "**cupy**" in observation.system_prompt and "REGISTER_BINDING" not in observation.system_prompt
    assert env.root / "episode-2" == root


def test_a_compile_step_builds_the_cupy_kernel_and_host_code_is_the_models_failure(tmp_path: Path) -> None:
    env = _env(tmp_path)

    async def episode() -> Any:
        await env.reset("examples/relu")
        await env.step(_write("kernels/relu.cu", SIMPLE_KERNEL))
        await env.step(_write("model_new.py", simple_model_new()))
        built = await env.step({"name": "compile"})
        # A torch-extension binding is host code: the CuPy build refuses it, as a CUDA build would not.
        await env.step(_write("kernels/relu_binding.cpp", "int host_code;\n"))
        refused = await env.step({"name": "compile"})
        return built, refused

    built, refused = anyio.run(episode)
    assert built.info.valid and built.info.compile_ok is True, built.observation
    assert built.reward == 0.0 and not built.done
    result = json.loads(built.observation)
    assert result["ok"] and result["language"] == "cupy"
    assert [k["name"] for k in result["kernels"]] == ["relu_kernel"]
    assert refused.info.compile_ok is False and refused.info.failure == "model", refused.observation
    assert "no host code" in refused.observation and not refused.info.mask
