"""A CuPy workspace through the MCP server, as a host drives it: the official SDK client over stdio (a
real server subprocess) starts a session in the cupy language, reads its SKILL.md, writes a kernel and
its launcher, compiles with NVRTC, and sees the language in the session's status and listing."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import REPO
from tests.languages.cupy_workspaces import SIMPLE_KERNEL, simple_model_new

pytestmark = pytest.mark.nvcc


def _stdio_server(root: Path, cache: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "cuda_agent_mcp", "serve", "--root", str(root)],
        env={
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/root"),
            "PYTHONPATH": str(REPO),
            "CUDA_AGENT_CACHE": str(cache),
        },
    )


def test_a_cupy_session_over_stdio_reads_its_guide_writes_compiles_and_reports_its_language(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    async def work() -> Any:
        async with Client(_stdio_server(tmp_path / "sessions", shared_build_cache)) as client:
            started = await client.call_tool(
                "start_session", {"task_id": "examples/relu", "language": "cupy"}
            )
            assert not started.is_error, started.content
            info = started.structured_content
            session = info["session_id"]
            skill = await client.call_tool("read_file", {"session_id": session, "path": "SKILL.md"})
            assert not skill.is_error, skill.content
            for path, content in (("kernels/relu.cu", SIMPLE_KERNEL), ("model_new.py", simple_model_new())):
                written = await client.call_tool(
                    "write_file", {"session_id": session, "path": path, "content": content}
                )
                assert not written.is_error, written.content
            built = await client.call_tool("compile", {"session_id": session})
            status = await client.call_tool("session_status", {"session_id": session})
            listed = await client.call_tool("list_sessions", {})
            workspace = Path(info["workspace"])
            record = (workspace / ".cuda-agent" / "workspace.json").read_text()
            return info, skill.structured_content, built, status.structured_content, listed, record

    info, skill, built, status, listed, record = anyio.run(work)
    assert info["language"] == "cupy"
    assert '"language": "cupy"' in record  # laid out in the language asked for, as the CLI would
    # No host harness in a CuPy workspace: nothing to protect but the reference.
    assert "binding.cpp" not in info["files"] and info["protected"] == ["model.py"]
    text = skill["content"]
    assert "language is\n**cupy**" in text and "NVRTC" in text and "cuda_extension.relu_kernel(" in text
    assert "REGISTER_BINDING" not in text  # the CUDA language's binding is not taught here
    assert not built.is_error and built.structured_content["status"] == "done", built.content
    result = built.structured_content["result"]
    assert result["ok"], result
    (kernel,) = result["kernels"]  # "name: N registers, ..." per kernel, read from the cubin
    assert kernel.startswith("relu_kernel: ") and "registers" in kernel
    assert status["session"]["language"] == "cupy" and status["session"]["session_id"] == info["session_id"]
    (summary,) = listed.structured_content["sessions"]
    assert summary["language"] == "cupy"


def test_a_session_started_without_a_language_is_a_cuda_one(tmp_path: Path, shared_build_cache: Path) -> None:
    async def work() -> Any:
        async with Client(_stdio_server(tmp_path / "sessions", shared_build_cache)) as client:
            started = await client.call_tool("start_session", {"task_id": "examples/relu"})
            session = started.structured_content["session_id"]
            skill = await client.call_tool("read_file", {"session_id": session, "path": "SKILL.md"})
            refused = await client.call_tool(
                "start_session", {"task_id": "examples/relu", "language": "rust"}
            )
            return started.structured_content, skill.structured_content["content"], refused

    info, skill, refused = anyio.run(work)
    assert info["language"] == "cuda" and "binding.cpp" in info["protected"]
    assert "REGISTER_BINDING" in skill and "**cupy**" not in skill
    text = " ".join(getattr(part, "text", "") for part in refused.content)
    assert refused.is_error and "language" in text and "cupy" in text, text
