"""The MCP server through the official SDK client: in memory and over stdio (a real subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from cuda_agent_mcp.server.app import build_server
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tasks import TaskCatalog
from tests.conftest import EXAMPLES, REPO

pytestmark = pytest.mark.nvcc

SMALL_RELU = (
    (EXAMPLES / "relu" / "model.py")
    .read_text()
    .replace("batch_size = 4096\ndim = 8192", "batch_size = 8\ndim = 16")
)
TORCH_MODEL_NEW = (
    "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return x.clamp_min(0)\n"
)
TOOLS = {
    "list_tasks", "start_session", "end_session", "session_status", "read_file", "write_file", "edit_file",
    "list_files", "search_files", "compile", "verify", "profile", "evaluate", "run", "wait_job", "cancel_job",
    "list_sessions",
}  # fmt: skip


@pytest.fixture
def server(tmp_path: Path, shared_build_cache: Path):
    return build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=shared_build_cache))


def run(work):
    return anyio.run(work)


def test_every_tool_is_listed_with_input_and_output_schemas(server) -> None:
    async def work():
        async with Client(server) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = run(work)
    assert set(tools) == TOOLS
    assert "session_id" in tools["compile"].input_schema["properties"]
    # Long tools answer with their result, or with a job handle past the budget.
    for name, field in (
        ("compile", "ok"),
        ("verify", "verdict"),
        ("profile", "verdict"),
        ("evaluate", "reward"),
    ):
        schema = tools[name].output_schema
        assert schema is not None and {"status", "result", "job"} <= set(schema["properties"]), name
        assert any(field in d.get("properties", {}) for d in schema["$defs"].values()), name
    assert tools["wait_job"].annotations is not None and tools["wait_job"].annotations.read_only_hint
    assert tools["read_file"].annotations is not None and tools["read_file"].annotations.read_only_hint


def test_a_whole_session_writes_compiles_verifies_profiles_and_keeps_history(server) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def work():
        async with Client(server) as client:
            started = await client.call_tool("start_session", {"reference_source": SMALL_RELU})
            assert not started.is_error, started.content
            session = started.structured_content["session_id"]
            assert "SKILL.md" in started.structured_content["files"]
            for name in ("relu.cu", "relu_binding.cpp"):
                text = (EXAMPLES / "relu" / "kernels" / name).read_text()
                written = await client.call_tool(
                    "write_file", {"session_id": session, "path": f"kernels/{name}", "content": text}
                )
                assert not written.is_error, written.content
            await client.call_tool(
                "write_file", {"session_id": session, "path": "model_new.py", "content": TORCH_MODEL_NEW}
            )
            built = await client.call_tool("compile", {"session_id": session}, progress_callback=on_progress)
            assert not built.is_error and built.structured_content["status"] == "done", built.content
            assert built.structured_content["result"]["ok"], built.content
            cpu = {"device": "cpu", "audit": False, "trials": 2}
            verified = await client.call_tool("verify", {"session_id": session, "request": cpu})
            assert verified.structured_content["result"]["verdict"]["status"] == "passed", verified.content
            audited = await client.call_tool("verify", {"session_id": session, "request": {"device": "cpu"}})
            assert audited.structured_content["result"]["verdict"]["reason"] == "forbidden_op"
            profiled = await client.call_tool(
                "profile",
                {"session_id": session, "request": {"device": "cpu", "audit": False, "baselines": "skip"}},
            )
            assert profiled.structured_content["result"]["verdict"]["status"] == "passed", profiled.content
            status = await client.call_tool("session_status", {"session_id": session})
            kinds = [(r["kind"], r["verdict"]) for r in status.structured_content["history"]]
            assert kinds == [("profile", "passed"), ("verify", "rejected"), ("verify", "passed")]
            ended = await client.call_tool("end_session", {"session_id": session})
            assert not ended.is_error
            return Path(ended.structured_content["workspace"])

    workspace = run(work)
    assert not workspace.exists()  # the server made it, the server removed it
    assert progress and [v for v, _ in progress] == sorted(v for v, _ in progress)
    assert any(message and message.startswith("plan:") for _, message in progress)


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("read_file", {"session_id": "nope", "path": "model.py"}, "no session 'nope'"),
        ("start_session", {"task_id": "examples/relu", "reference_source": "x"}, "exactly one of"),
        ("start_session", {"task_id": "no/such/task"}, "no/such/task"),
        ("start_session", {"reference_source": "import torch\n"}, "Model"),
        ("write_file", {"path": "model.py", "content": "x"}, "protected"),
        ("write_file", {"path": "../outside.py", "content": "x"}, "outside"),
        ("verify", {"request": {"trials": 0}}, "greater than or equal to 1"),
        ("read_file", {"path": 123}, "invalid arguments for read_file: path: expected a string (got 123)"),
        (
            "compile",
            {"request": {"keep": True}},
            "invalid arguments for compile: request.keep: unknown field",
        ),
    ],
)
def test_bad_arguments_come_back_as_readable_errors(
    server, tool: str, arguments: dict, expected: str
) -> None:
    async def work():
        async with Client(server) as client:
            if "session_id" not in arguments and tool != "start_session":
                started = await client.call_tool("start_session", {"reference_source": SMALL_RELU})
                arguments["session_id"] = started.structured_content["session_id"]
            return await client.call_tool(tool, arguments)

    result = run(work)
    assert result.is_error
    text = " ".join(getattr(part, "text", "") for part in result.content)
    assert expected in text, text
    assert "Traceback" not in text
    assert "For further information" not in text and "\n" not in text, text


def test_the_server_speaks_mcp_over_stdio(tmp_path: Path, shared_build_cache: Path) -> None:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cuda_agent_mcp", "serve", "--root", str(tmp_path / "sessions")],
        env={
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/root"),
            "PYTHONPATH": str(REPO),
            "CUDA_AGENT_CACHE": str(shared_build_cache),
        },
    )

    async def work():
        async with Client(parameters) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            listing = await client.call_tool("list_tasks", {"query": {"contains": "relu"}})
            return names, listing

    names, listing = run(work)
    assert names == TOOLS
    ids = [task["id"] for task in listing.structured_content["tasks"]]
    assert "examples/relu" in ids and all("relu" in i for i in ids)


# .ci/run installs it and sets the variable; elsewhere, one on PATH is used.
INSPECTOR = os.environ.get("CUDA_AGENT_MCP_INSPECTOR") or shutil.which("mcp-inspector") or "mcp-inspector"


@pytest.mark.skipif(
    shutil.which(INSPECTOR) is None, reason="MCP Inspector CLI not installed (.ci/run installs it)"
)
def test_the_mcp_inspector_cli_lists_and_calls_tools(tmp_path: Path, shared_build_cache: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_AGENT_CACHE": str(shared_build_cache)}
    server = [sys.executable, "-m", "cuda_agent_mcp", "serve", "--root", str(tmp_path / "sessions")]

    def inspect(*method: str) -> dict:
        done = subprocess.run(
            [INSPECTOR, "--cli", *server, *method],
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    listed = inspect("--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} == TOOLS
    called = inspect(
        "--method", "tools/call", "--tool-name", "start_session", "--tool-arg", "task_id=examples/relu"
    )
    assert not called.get("isError"), called
    assert called["structuredContent"]["task_id"] == "examples/relu"
    refused = inspect(
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        "session_id=nope",
        "--tool-arg",
        "path=model.py",
    )
    assert refused.get("isError") and "no session 'nope'" in refused["content"][0]["text"]


def test_run_executes_in_the_workspace_without_network_and_is_killed_at_its_limit(server) -> None:
    probe = "import os, socket\nprint(os.getcwd())\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n"

    async def work():
        async with Client(server) as client:
            started = await client.call_tool("start_session", {"reference_source": SMALL_RELU})
            session = started.structured_content["session_id"]
            await client.call_tool(
                "write_file", {"session_id": session, "path": "probe.py", "content": probe}
            )
            networked = await client.call_tool(
                "run", {"session_id": session, "request": {"argv": [sys.executable, "probe.py"]}}
            )
            slow = await client.call_tool(
                "run",
                {"session_id": session, "request": {"argv": ["sleep", "30"], "timeout_s": 1}},
            )
            return (
                started.structured_content["workspace"],
                networked.structured_content,
                slow.structured_content,
            )

    workspace, networked, slow = run(work)
    assert networked["process"]["returncode"] != 0
    assert workspace in networked["process"]["output"]
    if "network" in networked["isolation"]:
        assert "unreachable" in networked["process"]["output"] or "Errno" in networked["process"]["output"]
    assert slow["process"]["timed_out"] and slow["process"]["wall_s"] < 10


def test_resources_and_the_prompt(server) -> None:
    async def work():
        async with Client(server) as client:
            started = await client.call_tool("start_session", {"reference_source": SMALL_RELU})
            session = started.structured_content["session_id"]
            reference = await client.read_resource(f"session://{session}/reference")
            skill = await client.read_resource("guide://skill")
            gpus = await client.read_resource("gpu://specs")
            history = await client.read_resource(f"session://{session}/history")
            prompt = await client.get_prompt("optimize_kernel", {"session_id": session})
            return session, reference, skill, gpus, history, prompt

    session, reference, skill, gpus, history, prompt = run(work)
    assert reference.contents[0].text == SMALL_RELU
    assert "REGISTER_BINDING" in skill.contents[0].text
    assert "gpus" in json.loads(gpus.contents[0].text)
    assert json.loads(history.contents[0].text)["history"] == []
    assert session in prompt.messages[0].content.text


def test_a_missing_sessions_resource_is_the_sdks_not_found_error_with_its_reason(server) -> None:
    """Not a bare "error creating resource": the SDK's not-found code (-32602, SEP-2164), the reason, the URI."""

    async def read(uri: str) -> MCPError:
        async with Client(server) as client:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
        return caught.value

    for uri in ("session://nope/reference", "session://nope/history"):
        error = run(lambda uri=uri: read(uri))
        assert error.code == INVALID_PARAMS
        assert "no session 'nope'" in error.message and "start_session" in error.message
        assert error.data == {"uri": uri}
