"""Every bad argument of the file tools is answered through MCP as a readable tool error naming the
argument and what it expects (never the SDK's bare "Error executing tool"), and the session still works
after each one. Driven through the official SDK client, in memory."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from cuda_agent_mcp.server.app import build_server
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.workspace.limits import MAX_FILE_BYTES
from tests.conftest import EXAMPLES

REFERENCE = (EXAMPLES / "relu" / "model.py").read_text()

BAD_ARGUMENTS = [
    ("read_file", {"path": "a\x00b"}, "path: must not contain a NUL byte"),
    ("write_file", {"path": "kernels/a\x00.cu", "content": "x"}, "path: must not contain a NUL byte"),
    ("list_files", {"pattern": "/etc/*"}, "pattern: must be relative to the workspace (got '/etc/*')"),
    ("list_files", {"pattern": "../*"}, "pattern: must stay inside the workspace"),
    ("list_files", {"pattern": ""}, "pattern: must not be empty"),
    ("list_files", {"pattern": "kernels/a**"}, "pattern: '**' must be a whole path component"),
    ("list_files", {"pattern": "x\x00"}, "pattern: must not contain a NUL byte"),
    ("search_files", {"regex": "(unclosed"}, "regex: not a valid regular expression"),
    ("search_files", {"regex": "x", "pattern": "/etc/*"}, "pattern: must be relative to the workspace"),
    ("read_file", {"path": "k" * 5000}, "path: is 5000 bytes long, over the 1024"),
    ("read_file", {"path": "kernels/" + "n" * 300}, "path: a name in it is longer than 255 bytes"),
    ("read_file", {"path": "/etc/passwd"}, "path: must be relative to the workspace (got '/etc/passwd')"),
    ("read_file", {"path": ""}, "path: must not be empty"),
    ("read_file", {"path": "kernels"}, "path: kernels is a directory"),
    ("write_file", {"path": "kernels", "content": "x"}, "path: kernels is a directory"),
    ("write_file", {"path": "model_new.py/x.cu", "content": "x"}, "model_new.py/x.cu cannot be written"),
    ("edit_file", {"path": "kernels", "old_text": "a", "new_text": "b"}, "path: kernels is a directory"),
    ("edit_file", {"path": "model_new.py", "old_text": "", "new_text": "b"}, "old_text: must not be empty"),
    (
        "edit_file",
        {"path": "x\x00.cu", "old_text": "a", "new_text": "b"},
        "path: must not contain a NUL byte",
    ),
]


@pytest.fixture
def server(tmp_path: Path):
    return build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=tmp_path / "cache"))


def _text(result) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"), BAD_ARGUMENTS, ids=[f"{t}-{e[:30]}" for t, _, e in BAD_ARGUMENTS]
)
def test_a_bad_file_argument_is_a_readable_tool_error_and_the_session_lives_on(
    server, tool: str, arguments: dict, expected: str
) -> None:
    async def work():
        async with Client(server) as client:
            started = await client.call_tool("start_session", {"reference_source": REFERENCE})
            session = started.structured_content["session_id"]
            refused = await client.call_tool(tool, {"session_id": session, **arguments})
            after = await client.call_tool("read_file", {"session_id": session, "path": "model.py"})
            return refused, after

    refused, after = anyio.run(work)
    assert refused.is_error
    assert expected in _text(refused), _text(refused)
    assert not after.is_error and after.structured_content["content"] == REFERENCE


def test_write_file_and_compile_refuse_the_same_oversize_file_with_the_same_named_limit(server) -> None:
    oversize = "// " + "x" * MAX_FILE_BYTES + "\n"
    expected = "kernels/big.cu is 16.0 MiB, over the 16 MiB per-file limit (max_file_bytes)"

    async def work():
        async with Client(server) as client:
            started = await client.call_tool("start_session", {"reference_source": REFERENCE})
            session = started.structured_content["session_id"]
            written = await client.call_tool(
                "write_file", {"session_id": session, "path": "kernels/big.cu", "content": oversize}
            )
            # the same file put there by other means (an agent's command may write up to its own limit)
            Path(started.structured_content["workspace"], "kernels", "big.cu").write_text(oversize)
            compiled = await client.call_tool("compile", {"session_id": session})
            return written, compiled

    written, compiled = anyio.run(work)
    assert written.is_error and expected in _text(written), _text(written)
    assert expected in str(compiled.structured_content), compiled.structured_content
