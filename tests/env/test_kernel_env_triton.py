"""KernelEnv with `EnvironmentSettings(language="triton")`: every reset lays out a Triton workspace, the
policy is taught that language, and a compile step builds the @triton.jit kernels with Triton (on the
CPU: no GPU needed); a kernel Triton cannot compile is the model's failure."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.agent import EnvironmentSettings
from cuda_agent_mcp.env import KernelEnv, Solution, ToolCall, score_batch
from cuda_agent_mcp.tasks import TaskCatalog
from tests.languages.triton_workspaces import RELU_KERNEL, triton_model_new

pytestmark = pytest.mark.skipif(
    find_spec("triton") is None, reason="needs triton (CUDA builds of torch bring it)"
)

TRITON_CPU = EnvironmentSettings(language="triton", device="cpu", audit=False, baselines="skip")


def _env(tmp_path: Path) -> KernelEnv:
    return KernelEnv(catalog=TaskCatalog(), settings=TRITON_CPU, root=tmp_path / "env")


def _write(path: str, content: str) -> ToolCall:
    return ToolCall(name="write_file", arguments={"path": path, "content": content})


def test_each_reset_lays_out_a_triton_workspace_and_teaches_its_language(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for _ in range(2):  # a second episode is laid out the same way, in a fresh directory
        observation = anyio.run(env.reset, "examples/relu")
        assert env.session is not None
        root = env.session.workspace.root
        record = json.loads((root / ".cuda-agent" / "workspace.json").read_text())
        assert record["language"] == "triton" and env.session.workspace.language == "triton"
        assert "**triton**" in (root / "SKILL.md").read_text()
        assert "import triton" in (root / "model_new.py").read_text()  # the Triton skeleton
        assert not (root / "binding.cpp").exists() and not (root / "kernels").exists()
        assert (
            "**triton**" in observation.system_prompt and "REGISTER_BINDING" not in observation.system_prompt
        )
        assert "**cupy**" not in observation.system_prompt
    assert env.root / "episode-2" == root


def test_a_compile_step_builds_the_triton_kernel_and_a_compile_error_is_the_models_failure(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    broken = RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, no_such_name)")
    line = 8 + next(i for i, text in enumerate(broken.splitlines()) if "no_such_name" in text)

    async def episode() -> Any:
        await env.reset("examples/relu")
        await env.step(_write("model_new.py", triton_model_new()))
        built = await env.step({"name": "compile"})
        await env.step(_write("model_new.py", triton_model_new(kernel=broken)))
        failed = await env.step({"name": "compile"})
        # CUDA C++ is not this language's: the Triton build refuses a .cu file, also the model's failure.
        await env.step(_write("model_new.py", triton_model_new()))
        await env.step(_write("relu.cu", "__global__ void k() {}\n"))
        refused = await env.step({"name": "compile"})
        return built, failed, refused

    built, failed, refused = anyio.run(episode)
    assert built.info.valid and built.info.compile_ok is True, built.observation
    assert built.reward == 0.0 and not built.done
    result = json.loads(built.observation)
    assert result["ok"] and result["language"] == "triton"
    assert [k["name"] for k in result["kernels"]] == ["relu_kernel"]
    assert failed.info.compile_ok is False and failed.info.failure == "model", failed.observation
    assert f"model_new.py:{line}" in failed.observation and "no_such_name" in failed.observation
    assert not failed.info.mask and not failed.done
    assert refused.info.compile_ok is False and refused.info.failure == "model", refused.observation
    assert "relu.cu" in refused.observation and not refused.info.mask


def test_score_batch_builds_triton_solutions_and_a_compile_error_is_the_models(tmp_path: Path) -> None:
    broken = RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, no_such_name)")
    solutions = [
        Solution(task="examples/relu", files={"model_new.py": triton_model_new()}),
        Solution(task="examples/relu", files={"model_new.py": triton_model_new(kernel=broken)}),
        Solution(task="examples/relu", files={"model_new.py": triton_model_new(), "relu.cu": "int k;\n"}),
    ]
    scores = anyio.run(lambda: score_batch(solutions, catalog=TaskCatalog(), settings=TRITON_CPU, trials=2))
    assert [s.index for s in scores] == [0, 1, 2] and not any(s.masked for s in scores)
    # The Triton ReLU builds; running it needs a GPU, so on the CPU its verdict is the judge's, not the build's.
    assert scores[0].status != "compile_failed", scores[0]
    assert [s.status for s in scores[1:]] == ["compile_failed", "compile_failed"]
    assert [s.failure for s in scores[1:]] == ["model", "model"] and all(s.reward == -1.0 for s in scores)
    assert "no_such_name" in scores[1].message and "relu.cu" in scores[2].message
