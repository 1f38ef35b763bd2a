"""A Triton workspace through the MCP server, as a host drives it: the official SDK client over stdio (a
real server subprocess) starts a session in the triton language, reads its SKILL.md, writes model_new.py
with its @triton.jit kernel, compiles it with Triton, and sees the language in the session's status and
listing; the tool list a host loaded is the same whatever language its sessions are in."""

from __future__ import annotations

import json
import os
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import REPO
from tests.languages.triton_workspaces import RELU_KERNEL, triton_model_new

pytestmark = pytest.mark.skipif(
    find_spec("triton") is None, reason="needs triton (CUDA builds of torch bring it)"
)


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


def _text(result: Any) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)


def test_a_triton_session_over_stdio_reads_its_guide_writes_compiles_and_reports_its_language(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    async def work() -> Any:
        async with Client(_stdio_server(tmp_path / "sessions", shared_build_cache)) as client:
            started = await client.call_tool(
                "start_session", {"task_id": "examples/relu", "language": "triton"}
            )
            assert not started.is_error, started.content
            info = started.structured_content
            session = info["session_id"]
            skill = await client.call_tool("read_file", {"session_id": session, "path": "SKILL.md"})
            assert not skill.is_error, skill.content
            written = await client.call_tool(
                "write_file", {"session_id": session, "path": "model_new.py", "content": triton_model_new()}
            )
            assert not written.is_error, written.content
            built = await client.call_tool("compile", {"session_id": session})
            status = await client.call_tool("session_status", {"session_id": session})
            listed = await client.call_tool("list_sessions", {})
            workspace = Path(info["workspace"])
            record = (workspace / ".cuda-agent" / "workspace.json").read_text()
            return info, skill.structured_content, built, status.structured_content, listed, record

    info, skill, built, status, listed, record = anyio.run(work)
    assert info["language"] == "triton"
    assert json.loads(record)["language"] == "triton"  # laid out in the language asked for, as the CLI would
    # No host harness and no kernels/ in a Triton workspace: nothing to protect but the reference.
    assert "binding.cpp" not in info["files"] and info["protected"] == ["model.py"]
    assert not any(f.startswith("kernels/") for f in info["files"]), info["files"]
    text = skill["content"]
    assert "language is\n**triton**" in text and "@triton.jit" in text and "kernel[grid](" in text
    assert "REGISTER_BINDING" not in text and "NVRTC" not in text  # other languages are not taught here
    assert not built.is_error and built.structured_content["status"] == "done", built.content
    result = built.structured_content["result"]
    assert result["ok"], result
    (kernel,) = result["kernels"]  # "name: N registers, ..." per kernel, read from the cubin Triton made
    assert kernel.startswith("relu_kernel: ") and "registers" in kernel
    assert status["session"]["language"] == "triton" and status["session"]["session_id"] == info["session_id"]
    (summary,) = listed.structured_content["sessions"]
    assert summary["language"] == "triton"


def test_a_triton_compile_error_comes_back_as_a_result_at_its_file_and_line(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    broken = RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, no_such_name)")
    line = 8 + next(i for i, text in enumerate(broken.splitlines()) if "no_such_name" in text)

    async def work() -> Any:
        async with Client(_stdio_server(tmp_path / "sessions", shared_build_cache)) as client:
            started = await client.call_tool(
                "start_session", {"task_id": "examples/relu", "language": "triton"}
            )
            session = started.structured_content["session_id"]
            content = triton_model_new(kernel=broken)
            await client.call_tool(
                "write_file", {"session_id": session, "path": "model_new.py", "content": content}
            )
            return await client.call_tool("compile", {"session_id": session})

    built = anyio.run(work)
    # The candidate's error is a result to read, not a tool error: the host's model fixes it and retries.
    assert not built.is_error and built.structured_content["status"] == "done", built.content
    result = built.structured_content["result"]
    assert not result["ok"]
    (diagnostic,) = [d for d in result["diagnostics"] if ": error: " in d]
    assert diagnostic.startswith(f"model_new.py:{line}:"), diagnostic
    assert "relu_kernel" in diagnostic and "no_such_name" in diagnostic
    assert "Traceback" not in json.dumps(result)


def _descriptions(schema: Any) -> list[str]:
    """Every description in a JSON schema, at any depth."""
    if isinstance(schema, dict):
        own = [schema["description"]] if isinstance(schema.get("description"), str) else []
        return own + [d for v in schema.values() for d in _descriptions(v)]
    if isinstance(schema, list):
        return [d for v in schema for d in _descriptions(v)]
    return []


def _tools(listing: Any) -> list[dict]:
    return listing.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]


def test_the_tool_list_is_the_same_whatever_language_a_session_is_in(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    async def work() -> Any:
        async with Client(_stdio_server(tmp_path / "sessions", shared_build_cache)) as client:
            before = await client.list_tools()
            started = await client.call_tool(
                "start_session", {"task_id": "examples/relu", "language": "triton"}
            )
            assert not started.is_error, started.content
            after = await client.list_tools()
            refused = await client.call_tool(
                "start_session", {"task_id": "examples/relu", "language": "rust"}
            )
            return _tools(before), _tools(after), refused

    before, after, refused = anyio.run(work)
    assert before == after  # one list for every session: a host loads it once
    # Languages are described once, on start_session's language argument: no other tool's text (its
    # description or any argument's or field's) is about a language; results only type it (an enum).
    start = next(t for t in before if t["name"] == "start_session")
    language = start["inputSchema"]["properties"]["language"]
    assert "triton" in language["description"] and "cupy" in language["description"]
    texts = [t["description"] for t in before] + [
        text for t in before for text in _descriptions(t["inputSchema"]) + _descriptions(t["outputSchema"])
    ]
    texts.remove(language["description"])
    assert not [t for t in texts if "triton" in t.lower() or "cupy" in t.lower()]
    text = _text(refused)
    assert refused.is_error and "language" in text and "triton" in text, text
