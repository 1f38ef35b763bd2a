"""The MCP client configuration examples parse, and each names a command that starts our server."""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.conftest import EXAMPLES

CONFIGS = EXAMPLES / "mcp"


def _servers() -> dict[str, dict]:
    found = {}
    for path in sorted(CONFIGS.iterdir()):
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            entries = data.get("mcpServers") or data.get("servers")
        elif path.suffix == ".toml":
            entries = tomllib.loads(path.read_text())["mcp_servers"]
        else:
            continue
        found[path.name] = entries["cuda-agent"]
    return found


def test_there_is_a_configuration_for_each_client() -> None:
    assert set(_servers()) == {
        "claude_code.mcp.json",
        "cursor.mcp.json",
        "vscode.mcp.json",
        "codex.config.toml",
    }


@pytest.mark.parametrize(("name", "entry"), sorted(_servers().items()))
def test_each_configuration_runs_cuda_agent_serve(name: str, entry: dict) -> None:
    assert entry["command"] == "cuda-agent" and entry["args"] == ["serve"], name
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in entry.get("env", {}).items())
    if name.startswith("vscode"):
        assert entry["type"] == "stdio"  # VS Code requires the transport type
    if name.startswith("codex"):
        assert entry["tool_timeout_sec"] >= 60
