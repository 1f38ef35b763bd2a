"""A workspace's record of its task (`.cuda-agent/workspace.json`) that cannot be read is an error saying
how to repair it, from the CLI and the MCP tools alike, never silently ignored (the workspace would be
judged as another task)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from cuda_agent_mcp.errors import WorkspaceError
from cuda_agent_mcp.server.app import build_server
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.workspace import Workspace
from tests.cli.test_cli import cli
from tests.conftest import EXAMPLES

REFERENCE = (EXAMPLES / "relu" / "model.py").read_text()


def _workspace(tmp_path: Path, record: str | None) -> Path:
    root = tmp_path / "ws"
    (root / ".cuda-agent").mkdir(parents=True)
    (root / "model.py").write_text(REFERENCE)
    if record is not None:
        (root / ".cuda-agent" / "workspace.json").write_text(record)
    return root


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ('{"task_', "workspace.json is not valid JSON (line 1 col 2)"),
        ("[1, 2]", "workspace.json has no task_id"),
        ('{"task_id": 7}', "workspace.json has no task_id"),
    ],
)
def test_a_corrupt_record_is_refused_with_how_to_repair_it(
    tmp_path: Path, record: str, expected: str
) -> None:
    root = _workspace(tmp_path, record)
    with pytest.raises(WorkspaceError, match="delete it") as refused:
        Workspace.open(root)
    assert expected in str(refused.value) and "restore it" in str(refused.value)


def test_a_readable_record_names_the_task_and_a_missing_one_is_the_folders_own(tmp_path: Path) -> None:
    assert Workspace.open(_workspace(tmp_path / "a", json.dumps({"task_id": "examples/relu"}))).task_id == (
        "examples/relu"
    )
    assert Workspace.open(_workspace(tmp_path / "b", None)).task_id == "workspace/ws"


def test_the_cli_says_it_in_one_line_and_in_its_json(tmp_path: Path) -> None:
    root = _workspace(tmp_path, "{oops")
    done = cli("audit", str(root), cache=tmp_path / "cache")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "workspace.json is not valid JSON (line 1 col 2)" in done.stderr, done.stderr
    as_json = cli("audit", str(root), "--json", cache=tmp_path / "cache")
    assert "is not valid JSON" in json.loads(as_json.stdout)["error"]["message"]


def test_the_mcp_tool_answers_it_as_a_readable_tool_error(tmp_path: Path) -> None:
    root = _workspace(tmp_path, "{oops")
    server = build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=tmp_path / "cache"))

    async def work():
        async with Client(server) as client:
            return await client.call_tool("start_session", {"directory": str(root)})

    result = anyio.run(work)
    text = " ".join(getattr(part, "text", "") for part in result.content)
    assert result.is_error and "workspace.json is not valid JSON (line 1 col 2)" in text, text
